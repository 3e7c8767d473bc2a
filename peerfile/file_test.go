package peerfile

import (
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/nofollow/nofollowtest"
)

// exportTree builds root/out (the export root) beside root/secret.txt, outside it, with the entries the
// traversal tests need. It returns the export root and its path.
func exportTree(t *testing.T) (Root, string) {
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
	return Root{Workdir: root, Dir: "out"}, out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestInspectRefuses(t *testing.T) {
	root, out := exportTree(t)
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
		{"out-link", ErrLink},
		{"abs-link", ErrLink},
		{"up/secret.txt", ErrLink},
		{"loop-a", ErrLink},
		{"fifo", ErrNotRegular},
		{"fifo-link", ErrLink},
		{"dev-link", ErrLink},
		{"inside-link", ErrLink},
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
				_, err = Inspect(root, tc.path)
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
	root := Root{Workdir: filepath.Dir(out), Dir: filepath.Base(out)}
	// A character device like /dev/null (1, 3), made where it is shared; only root may make one.
	if err := syscall.Mknod(filepath.Join(out, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("cannot make a device node here: %v", err)
	}
	_, err := Inspect(root, "null")
	if !errors.Is(err, ErrNotRegular) || err.Error() != `"null" is a device, not a regular file` {
		t.Errorf("Inspect of a device: %v", err)
	}
}

func TestInspect(t *testing.T) {
	root, out := exportTree(t)
	fi, _ := os.Stat(filepath.Join(out, "a.txt"))
	want := File{Path: "a.txt", Size: 5, ModTime: fi.ModTime().UnixNano(), Digest: sha256.Sum256([]byte("hello"))}
	for _, p := range []string{"a.txt", "./a.txt", "sub/../a.txt"} {
		got, err := Inspect(root, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Inspect(%q) (-want +got):\n%s", p, diff)
		}
	}
	got, err := Inspect(root, "sub/b.txt")
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
		{"a symlink to the same file", func(t *testing.T, out, p string) {
			must(t, os.Rename(p, filepath.Join(out, "moved.txt")))
			must(t, os.Symlink("moved.txt", p))
		}, ErrChanged},
		{"the export root made a link to a copy", func(t *testing.T, out, _ string) {
			copyDir := filepath.Join(filepath.Dir(out), "copy")
			must(t, os.Rename(out, copyDir))
			must(t, os.Symlink("copy", out))
		}, ErrLink},
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
			root, out := exportTree(t)
			p := filepath.Join(out, "a.txt")
			must(t, os.Chtimes(p, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
			id, err := Inspect(root, "a.txt")
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, out, p)
			f, err := Open(root, id)
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

// TestRootThatIsALinkIsRefused is the attack of issue 28: a command replaces out/ with a link to the
// member's data directory and shares operator.token. Neither Inspect nor Open reads through it, and the
// refusal names the link.
func TestRootThatIsALinkIsRefused(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	must(t, os.MkdirAll(filepath.Join(base, "work"), 0o755))
	must(t, os.MkdirAll(data, 0o755))
	must(t, os.WriteFile(filepath.Join(data, "operator.token"), []byte("op-secret"), 0o600))
	must(t, os.Symlink(data, filepath.Join(base, "work", "out")))
	root := Root{Workdir: filepath.Join(base, "work"), Dir: "out"}
	_, err := Inspect(root, "operator.token")
	if !errors.Is(err, ErrLink) || !strings.Contains(err.Error(), "the export root out is a symbolic link") {
		t.Fatalf("Inspect through a linked root: %v", err)
	}
	if Reason(err) != "symlink" || Status(err) != 409 {
		t.Fatalf("reason %q status %d", Reason(err), Status(err))
	}
	fi, _ := os.Stat(filepath.Join(data, "operator.token"))
	f := File{Path: "operator.token", Size: fi.Size(), ModTime: fi.ModTime().UnixNano(), Digest: sha256.Sum256([]byte("op-secret"))}
	if _, err := Open(root, f); !errors.Is(err, ErrLink) {
		t.Fatalf("Open through a linked root: %v", err)
	}
	// The same below the root: out/ a directory, out/d a link to the data directory.
	must(t, os.Remove(filepath.Join(base, "work", "out")))
	must(t, os.MkdirAll(filepath.Join(base, "work", "out"), 0o755))
	must(t, os.Symlink(data, filepath.Join(base, "work", "out", "d")))
	if _, err := Inspect(root, "d/operator.token"); !errors.Is(err, ErrLink) || !strings.Contains(err.Error(), "out/d") {
		t.Fatalf("Inspect through a link below the root: %v", err)
	}
}

// FuzzInspectStaysInside places, at any component of out/…, what a command could have put there (links
// out of the workdir or back into it, FIFOs, sockets, devices), then shares every path it placed and the
// secrets' paths: no handle is ever minted for a file outside the workdir, and nothing blocks.
func FuzzInspectStaysInside(f *testing.F) {
	for _, s := range nofollowtest.Seeds {
		f.Add(s)
	}
	outsideDigest := sha256.Sum256([]byte(nofollowtest.Secret))
	f.Fuzz(func(t *testing.T, plan []byte) {
		work, outside := nofollowtest.Tree(t)
		paths := nofollowtest.Plant(t, work, outside, plan)
		root := Root{Workdir: work, Dir: "out"}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, p := range append(paths, "out/secret", "out/artifacts/secret", "out/deep/secret", "out/out/secret") {
				rel, err := filepath.Rel("out", p)
				if err != nil || !filepath.IsLocal(rel) {
					continue
				}
				if got, err := Inspect(root, rel); err == nil && got.Digest == outsideDigest {
					t.Errorf("Inspect(%q) minted the identity of a file outside the workdir (plan %v)", rel, plan)
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Inspect blocked (plan %v)", plan)
		}
	})
}
