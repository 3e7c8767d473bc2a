package postgres

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// opener is a KeepPeerFile open that hands out body and counts its calls.
func opener(body []byte, calls *int) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		*calls++
		return io.NopCloser(bytes.NewReader(body)), nil
	}
}

// readAll reads f's body whole, failing t on an error.
func readAll(t *testing.T, f store.SharedFile) []byte {
	t.Helper()
	b, err := io.ReadAll(f.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chunks counts the rows of shared_file_chunks, behind the store's back.
func chunks(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM shared_file_chunks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPeerFiles: a peer file kept by one replica is read by another, whole and in parts, over several
// chunks; keeping the same bytes again moves the expiry and reads nothing; bytes that are not the ones
// named, or too many, are refused and leave nothing; an expired file is not served, and the sweeper
// removes it with its chunks.
func TestPeerFiles(t *testing.T) {
	ctx := t.Context()
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	content := make([]byte, 2*fileChunk+12345)
	rand.Read(content)
	digest := sha256.Sum256(content)
	size := int64(len(content))

	calls := 0
	if err := r1.KeepPeerFile(ctx, digest, size, epoch.Add(time.Hour), opener(content, &calls)); err != nil || calls != 1 {
		t.Fatalf("KeepPeerFile = %v after %d opens; want nil after 1", err, calls)
	}
	f, err := r2.PeerFile(ctx, digest, size)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, content) || f.Size != size || f.SHA256 != digest || !f.Kept.Equal(epoch) {
		t.Fatalf("r2 read %d bytes (equal: %v), size %d, SHA-256 %x, kept %v", len(got), bytes.Equal(got, content), f.Size, f.SHA256, f.Kept)
	}
	if n := chunks(t, r1); n != 3 {
		t.Errorf("%d chunks for %d bytes, want 3", n, size)
	}
	// Parts of it, across a chunk's end, as a range request reads them.
	at := int64(fileChunk - 10)
	if _, err := f.Body.Seek(at, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 30)
	if _, err := io.ReadFull(f.Body, part); err != nil || !bytes.Equal(part, content[at:at+30]) {
		t.Errorf("30 bytes at %d: %v, equal %v", at, err, bytes.Equal(part, content[at:at+30]))
	}
	if end, err := f.Body.Seek(0, io.SeekEnd); err != nil || end != size {
		t.Errorf("Seek to the end = %d, %v; want %d", end, err, size)
	}
	if n, err := f.Body.Read(part); n != 0 || err != io.EOF {
		t.Errorf("a read at the end = %d, %v; want 0, EOF", n, err)
	}

	// Shared again, by another replica, for longer: nothing is read, the later expiry is kept.
	if err := r2.KeepPeerFile(ctx, digest, size, epoch.Add(3*time.Hour), opener(content, &calls)); err != nil || calls != 1 {
		t.Fatalf("KeepPeerFile of kept bytes = %v after %d opens; want nil, and no open", err, calls)
	}
	if err := r1.KeepPeerFile(ctx, digest, size, epoch.Add(2*time.Hour), opener(content, &calls)); err != nil || calls != 1 {
		t.Fatalf("KeepPeerFile of kept bytes for less long = %v after %d opens", err, calls)
	}

	// Other bytes than the handle names: refused, nothing kept.
	other := bytes.Repeat([]byte("x"), 100)
	for name, body := range map[string][]byte{"shorter": other[:50], "longer": append(other, 'y'), "different": bytes.Repeat([]byte("y"), 100)} {
		if err := r1.KeepPeerFile(ctx, sha256.Sum256(other), 100, epoch.Add(time.Hour), opener(body, &calls)); !errors.Is(err, store.ErrFileChanged) {
			t.Errorf("%s bytes: %v, want ErrFileChanged", name, err)
		}
	}
	if _, err := r2.PeerFile(ctx, sha256.Sum256(other), 100); !errors.Is(err, store.ErrFileNotKept) {
		t.Errorf("a file whose keeping failed: %v, want ErrFileNotKept", err)
	}
	if n := chunks(t, r1); n != 3 {
		t.Errorf("%d chunks after the refusals, want the 3 of the kept file", n)
	}
	// An open that fails is its own error; a file past the limit is not opened.
	gone := errors.New("the file is gone")
	if err := r1.KeepPeerFile(ctx, sha256.Sum256(other), 100, epoch.Add(time.Hour), func() (io.ReadCloser, error) { return nil, gone }); !errors.Is(err, gone) {
		t.Errorf("a failed open: %v", err)
	}
	before := calls
	if err := r1.KeepPeerFile(ctx, [32]byte{1}, store.MaxSharedFile+1, epoch.Add(time.Hour), opener(nil, &calls)); !errors.Is(err, store.ErrFileTooLarge) || calls != before {
		t.Errorf("a file past the limit: %v after %d opens", err, calls-before)
	}
	if _, err := r2.PeerFile(ctx, digest, size-1); !errors.Is(err, store.ErrFileNotKept) {
		t.Errorf("the digest with another size: %v, want ErrFileNotKept", err)
	}

	// Expired (the latest expiry was 3 h): served until then, not after; the sweep removes it.
	clk.Add(3*time.Hour - time.Millisecond)
	if _, err := r2.PeerFile(ctx, digest, size); err != nil {
		t.Fatalf("before its expiry: %v", err)
	}
	if n, err := r1.sweepFiles(ctx); n != 0 || err != nil {
		t.Errorf("a sweep before the expiry removed %d (%v)", n, err)
	}
	clk.Add(time.Millisecond)
	if _, err := r2.PeerFile(ctx, digest, size); !errors.Is(err, store.ErrFileNotKept) {
		t.Errorf("at its expiry: %v, want ErrFileNotKept", err)
	}
	if n, err := r1.sweepFiles(ctx); n != 1 || err != nil {
		t.Errorf("the sweep at the expiry removed %d (%v), want 1", n, err)
	}
	if n := chunks(t, r1); n != 0 {
		t.Errorf("%d chunks after the sweep, want none", n)
	}
	// A read of a file removed under it fails, saying so.
	if _, err := f.Body.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	f.Body.(*chunkReader).loaded = -1
	if _, err := f.Body.Read(part); !errors.Is(err, store.ErrFileNotKept) || !strings.Contains(err.Error(), "removed while it was read") {
		t.Errorf("reading a removed file: %v", err)
	}
}

// TestArtifactFiles: an artifact's file kept by the replica that ran its task is read by another; kept
// again under its name it is replaced; one past the limit is refused and leaves what was kept; it goes
// when its task is removed.
func TestArtifactFiles(t *testing.T) {
	ctx := t.Context()
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	tk := task(1, "ctx", a2a.TaskStateWorking)
	mustCreate(t, r1, tk)
	content := make([]byte, fileChunk+1)
	rand.Read(content)
	if err := r1.KeepArtifactFile(ctx, tk.ID, "out/big.bin", bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	f, err := r2.ArtifactFile(ctx, tk.ID, "out/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, content) || f.Size != int64(len(content)) || f.SHA256 != sha256.Sum256(content) {
		t.Fatalf("r2 read %d bytes (equal: %v), size %d", len(got), bytes.Equal(got, content), f.Size)
	}
	for _, miss := range []struct {
		id   a2a.TaskID
		name string
	}{{tk.ID, "big.bin"}, {"tsk_none", "out/big.bin"}, {tk.ID, "bad\x00name"}} {
		if _, err := r2.ArtifactFile(ctx, miss.id, miss.name); !errors.Is(err, store.ErrFileNotKept) {
			t.Errorf("ArtifactFile(%s, %q) = %v, want ErrFileNotKept", miss.id, miss.name, err)
		}
	}

	// Kept again: replaced. Past the limit: refused, the earlier kept.
	if err := r1.KeepArtifactFile(ctx, tk.ID, "out/big.bin", strings.NewReader("second")); err != nil {
		t.Fatal(err)
	}
	if f, err := r2.ArtifactFile(ctx, tk.ID, "out/big.bin"); err != nil || string(readAll(t, f)) != "second" {
		t.Fatalf("after a second keep: %v", err)
	}
	if err := r1.keepArtifactFile(ctx, tk.ID, "out/big.bin", strings.NewReader("eleven char"), 10); !errors.Is(err, store.ErrFileTooLarge) {
		t.Errorf("past the limit: %v, want ErrFileTooLarge", err)
	}
	if f, err := r2.ArtifactFile(ctx, tk.ID, "out/big.bin"); err != nil || string(readAll(t, f)) != "second" {
		t.Fatalf("after a refused keep: %v", err)
	}
	// A body that fails is the caller's failure, said so.
	broken := io.MultiReader(strings.NewReader("part"), iotestErr{})
	if err := r1.KeepArtifactFile(ctx, tk.ID, "out/other.bin", broken); err == nil || !strings.Contains(err.Error(), "reading the file to keep: disk on fire") {
		t.Errorf("a failing body: %v", err)
	}
	if err := r1.KeepArtifactFile(ctx, "tsk_none", "x", strings.NewReader("x")); err == nil {
		t.Error("a file of a task not stored was kept")
	}

	// The task removed: its file goes with it.
	if _, err := r1.pool.Exec(ctx, `DELETE FROM tasks WHERE id = $1`, string(tk.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.ArtifactFile(ctx, tk.ID, "out/big.bin"); !errors.Is(err, store.ErrFileNotKept) {
		t.Errorf("after its task was removed: %v, want ErrFileNotKept", err)
	}
	if n := chunks(t, r1); n != 0 {
		t.Errorf("%d chunks after the task was removed, want none", n)
	}
}

// iotestErr is a reader that fails.
type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }
