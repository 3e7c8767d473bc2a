package share

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

// fakeKeeper records what share-file asks it to keep, reads the file through open unless kept says it
// has it, and answers err.
type fakeKeeper struct {
	kept    bool
	err     error
	before  func() // runs before open is called
	digest  [sha256.Size]byte
	size    int64
	expires time.Time
	body    []byte
}

func (k *fakeKeeper) KeepPeerFile(_ context.Context, digest [sha256.Size]byte, size int64, expires time.Time, open func() (io.ReadCloser, error)) error {
	k.digest, k.size, k.expires = digest, size, expires
	if k.kept || k.err != nil {
		return k.err
	}
	if k.before != nil {
		k.before()
	}
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	k.body, err = io.ReadAll(r)
	return err
}

// TestShareFileOnReplicas: on a member's replicas share-file copies the file into the shared store
// before it mints a handle, until the handle's expiry; when the store cannot keep it, no handle is
// minted and the refusal says why.
func TestShareFileOnReplicas(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	share := func(t *testing.T, k *fakeKeeper) (runtimetools.SharedFile, error) {
		t.Helper()
		work := t.TempDir()
		os.MkdirAll(filepath.Join(work, "out"), 0o755)
		os.WriteFile(filepath.Join(work, "out", "report.txt"), []byte("the report"), 0o644)
		if k.before != nil {
			before := k.before
			k.before = func() { before(); os.Remove(filepath.Join(work, "out", "report.txt")) }
		}
		pf := New(Config{Capsule: &capsule.Capsule{Exports: capsule.Exports{PeerFiles: "out", PeerFilesTTL: time.Hour}},
			Roster: &roster.Roster{Formation: "f"}, Member: "lead", FormationToken: "secret", Now: func() time.Time { return now },
			Log: slog.New(slog.DiscardHandler), Workdir: work, Keeper: k})
		return pf.ShareFile(t.Context(), "report.txt")
	}
	reason := func(err error) string {
		var r *runtimetools.Refusal
		if errors.As(err, &r) {
			return r.Reason + ": " + r.Text
		}
		return "not a refusal: " + err.Error()
	}

	k := &fakeKeeper{}
	sf, err := share(t, k)
	if err != nil {
		t.Fatal(err)
	}
	h, err := peerfile.Decode(sf.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if string(k.body) != "the report" || k.digest != sha256.Sum256([]byte("the report")) || k.size != 10 || !k.expires.Equal(now.Add(time.Hour)) || h.ExpiresAt().After(k.expires) {
		t.Errorf("kept %q, digest %x, size %d, until %v (the handle's expiry %v)", k.body, k.digest, k.size, k.expires, h.ExpiresAt())
	}
	if _, err := share(t, &fakeKeeper{kept: true}); err != nil {
		t.Errorf("bytes kept already: %v", err)
	}
	for _, tc := range []struct {
		name string
		k    *fakeKeeper
		want string
	}{
		{"changed while kept", &fakeKeeper{err: store.ErrFileChanged}, "changed: 'share-file' refused: report.txt changed while it was being shared"},
		{"gone before it was opened", &fakeKeeper{before: func() {}}, "not_found: 'share-file' refused: report.txt is no longer under the export root"},
		{"the store fails", &fakeKeeper{err: errors.New("database down")}, "store_failed: 'share-file' refused: report.txt could not be copied into this member's database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if sf, err := share(t, tc.k); err == nil || !strings.HasPrefix(reason(err), tc.want) {
				t.Errorf("share-file = %+v, %v; want the refusal %q", sf, err, tc.want)
			}
		})
	}
}
