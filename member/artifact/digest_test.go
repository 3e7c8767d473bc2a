package artifact

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func sumOf(stream string) string {
	h := sha256.Sum256([]byte(stream))
	return DigestPrefix + hex.EncodeToString(h[:])
}

// stream writes files (path, bytes, path, bytes, …) as Digest streams them: each as an 8-byte
// big-endian length and the path, then an 8-byte big-endian length and the bytes.
func stream(files ...string) string {
	var b []byte
	for _, f := range files {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return string(b)
}

func TestDigestFormat(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"murmur.yaml": "m", "b/c": "yz", "a": "x"})
	got, err := Digest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := sumOf(stream("a", "x", "b/c", "yz", "murmur.yaml", "m")); got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
	if !ValidDigest(got) {
		t.Errorf("ValidDigest(%s) = false", got)
	}
}

// TestDigestOrder checks the order is the byte order of whole paths, not the order a directory walk
// visits them in ("a/x" is visited before "a-b", but "a-b" < "a/x").
func TestDigestOrder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a/x": "1", "a-b": "2"})
	got, err := Digest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := sumOf(stream("a-b", "2", "a/x", "1")); got != want {
		t.Errorf("Digest = %s, want %s (a-b before a/x)", got, want)
	}
}

// TestDigestInjective checks that file bytes holding NULs cannot pass for a file boundary: under the
// earlier path\0bytes\0 form, {a: "x\0b\0y"} and {a: "x", b: "y"} streamed the same bytes.
func TestDigestInjective(t *testing.T) {
	one, two := t.TempDir(), t.TempDir()
	writeFiles(t, one, map[string]string{"a": "x\x00b\x00y"})
	writeFiles(t, two, map[string]string{"a": "x", "b": "y"})
	d1, err1 := Digest(one)
	d2, err2 := Digest(two)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if d1 == d2 {
		t.Errorf("{a: x\\0b\\0y} and {a: x, b: y} both digest to %s", d1)
	}
}

func TestDigestChanges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"murmur.yaml": "name: x\n", "tool.wasm": wasmHead + "abc"})
	before, _ := Digest(dir)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	if same, _ := Digest(dir); same != before {
		t.Errorf("an empty directory changed the digest")
	}
	writeFiles(t, dir, map[string]string{"tool.wasm": wasmHead + "abd"})
	if after, _ := Digest(dir); after == before {
		t.Errorf("a changed byte left the digest %s", after)
	}
	writeFiles(t, dir, map[string]string{"tool.wasm": wasmHead + "abc"})
	if back, _ := Digest(dir); back != before {
		t.Errorf("the same bytes again digest to %s, want %s", back, before)
	}
	os.Rename(filepath.Join(dir, "tool.wasm"), filepath.Join(dir, "tool2.wasm"))
	if renamed, _ := Digest(dir); renamed == before {
		t.Errorf("a renamed file left the digest unchanged")
	}
}

func TestDigestRefusesLinksAndSpecialFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(dir string) string // returns the offending path
		want string
	}{
		{"symlink to a file inside", func(dir string) string {
			p := filepath.Join(dir, "link.wasm")
			os.Symlink("tool.wasm", p)
			return p
		}, "is a symbolic link; an artifact holds regular files and directories only; replace it with the file it stands for, or remove it"},
		{"symlink to a directory outside", func(dir string) string {
			p := filepath.Join(dir, "sub", "etc")
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.Symlink("/etc", p)
			return p
		}, "is a symbolic link; an artifact holds regular files and directories only; replace it with the file it stands for, or remove it"},
		{"named pipe", func(dir string) string {
			p := filepath.Join(dir, "fifo")
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Skip("no mkfifo here:", err)
			}
			return p
		}, "is a named pipe; an artifact holds regular files and directories only; replace it with the file it stands for, or remove it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"tool.wasm": wasmHead})
			bad := tc.make(dir)
			_, err := Digest(dir)
			if want := bad + ": " + tc.want; err == nil || err.Error() != want {
				t.Errorf("err = %v, want %s", err, want)
			}
		})
	}
	// The artifact directory itself may not be a link either.
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	writeFiles(t, real, map[string]string{"a": "1"})
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	if _, err := Digest(link); err == nil || err.Error() != link+": is a symbolic link, not a directory; an artifact is a directory of regular files" {
		t.Errorf("err = %v", err)
	}
}
