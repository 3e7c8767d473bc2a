package peerfile

import (
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// exportTree builds root/out (the export root) beside root/secret.txt, outside it, with the entries the
// traversal tests need. It returns the export root.
func exportTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	must(t, os.MkdirAll(filepath.Join(out, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "secret.txt"), []byte("outside"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "a.txt"), []byte("hello"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "sub", "b.txt"), []byte("bee"), 0o644))
	must(t, os.Symlink("a.txt", filepath.Join(out, "inside-link")))
	must(t, os.Symlink("../secret.txt", filepath.Join(out, "out-link")))
	must(t, os.Symlink(filepath.Join(root, "secret.txt"), filepath.Join(out, "abs-link")))
	must(t, os.Symlink("..", filepath.Join(out, "up")))
	must(t, os.Symlink("loop-b", filepath.Join(out, "loop-a")))
	must(t, os.Symlink("loop-a", filepath.Join(out, "loop-b")))
	must(t, syscall.Mkfifo(filepath.Join(out, "fifo"), 0o644))
	must(t, os.Symlink("fifo", filepath.Join(out, "fifo-link")))
	must(t, os.Symlink("/dev/null", filepath.Join(out, "dev-link")))
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestInspectRefuses(t *testing.T) {
	out := exportTree(t)
	for _, tc := range []struct {
		path string
		want error
	}{
		{"../secret.txt", ErrBadPath},
		{"a/../../secret.txt", ErrBadPath},
		{filepath.Join(filepath.Dir(out), "secret.txt"), ErrBadPath},
		{"/etc/passwd", ErrBadPath},
		{"", ErrBadPath},
		{"a.txt\x00", ErrBadPath},
		{"out-link", ErrOutside},
		{"abs-link", ErrOutside},
		{"up/secret.txt", ErrOutside},
		{"loop-a", ErrNotRegular},
		{"fifo", ErrNotRegular},
		{"fifo-link", ErrNotRegular},
		{"dev-link", ErrOutside},
		{"sub", ErrNotRegular},
		{".", ErrNotRegular},
		{"missing.txt", ErrNotFound},
		{"a.txt/x", ErrNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			done := make(chan struct{})
			var err error
			go func() {
				defer close(done)
				_, err = Inspect(out, tc.path)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Inspect blocked")
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Inspect(%q) = %v, want %v", tc.path, err, tc.want)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Detail == "" {
				t.Errorf("Inspect(%q): %v carries no sentence", tc.path, err)
			}
		})
	}
}

func TestInspectDevice(t *testing.T) {
	out := t.TempDir()
	// A character device like /dev/null (1, 3), made where it is shared; only root may make one.
	if err := syscall.Mknod(filepath.Join(out, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("cannot make a device node here: %v", err)
	}
	_, err := Inspect(out, "null")
	if !errors.Is(err, ErrNotRegular) || err.Error() != `"null" is a device, not a regular file` {
		t.Errorf("Inspect of a device: %v", err)
	}
}

func TestInspect(t *testing.T) {
	out := exportTree(t)
	fi, _ := os.Stat(filepath.Join(out, "a.txt"))
	want := File{Path: "a.txt", Size: 5, ModTime: fi.ModTime().UnixNano(), Digest: sha256.Sum256([]byte("hello"))}
	for _, p := range []string{"a.txt", "./a.txt", "sub/../a.txt"} {
		got, err := Inspect(out, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Inspect(%q) (-want +got):\n%s", p, diff)
		}
	}
	// A symbolic link that stays inside the root is followed: the handle names the link's path.
	got, err := Inspect(out, "inside-link")
	if err != nil || got.Digest != want.Digest || got.Path != "inside-link" {
		t.Errorf("Inspect through a link inside the root: %+v %v", got, err)
	}
	got, err = Inspect(out, "sub/b.txt")
	if err != nil || got.Path != "sub/b.txt" || got.Size != 3 {
		t.Errorf("Inspect(sub/b.txt) = %+v %v", got, err)
	}
}

// TestOpenRefusesAnotherFile mints the identity of a file, changes the file in one way, and checks that
// Open refuses it.
func TestOpenRefusesAnotherFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, out, p string)
		want   error
	}{
		{"unchanged", func(*testing.T, string, string) {}, nil},
		{"grown", func(t *testing.T, _, p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("!")
			f.Close()
		}, ErrChanged},
		{"touched", func(t *testing.T, _, p string) {
			must(t, os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)))
		}, ErrChanged},
		{"rewritten with the same size and time", func(t *testing.T, _, p string) {
			fi, _ := os.Stat(p)
			must(t, os.WriteFile(p, []byte("HELLO"), 0o644))
			must(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
		}, ErrChanged},
		{"replaced by rename", func(t *testing.T, out, p string) {
			must(t, os.WriteFile(filepath.Join(out, "new"), []byte("other"), 0o644))
			must(t, os.Rename(filepath.Join(out, "new"), p))
		}, ErrChanged},
		{"renamed away", func(t *testing.T, out, p string) {
			must(t, os.Rename(p, filepath.Join(out, "moved.txt")))
		}, ErrNotFound},
		{"deleted", func(t *testing.T, _, p string) { must(t, os.Remove(p)) }, ErrNotFound},
		{"a symlink out of the root", func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			must(t, os.Symlink("../secret.txt", p))
		}, ErrChanged},
		{"a FIFO", func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			must(t, syscall.Mkfifo(p, 0o644))
		}, ErrChanged},
		{"a directory", func(t *testing.T, _, p string) {
			must(t, os.Remove(p))
			must(t, os.Mkdir(p, 0o755))
		}, ErrChanged},
		{"the export root removed", func(t *testing.T, out, _ string) { must(t, os.RemoveAll(out)) }, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := exportTree(t)
			p := filepath.Join(out, "a.txt")
			must(t, os.Chtimes(p, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
			id, err := Inspect(out, "a.txt")
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, out, p)
			f, err := Open(out, id)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			if string(b) != "hello" {
				t.Errorf("Open read %q", b)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"a": true, "a/b": true, "a/../b": true, "./a": true,
		"": false, "..": false, "../a": false, "a/../../b": false, "/a": false, "a\x00": false,
	} {
		if err := CheckPath(p); (err == nil) != ok {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
}
