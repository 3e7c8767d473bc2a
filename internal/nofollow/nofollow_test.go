package nofollow

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/internal/nofollow/nofollowtest"
)

func tree(t testing.TB) (work, outside string) { return nofollowtest.Tree(t) }

func mustOpen(t testing.TB, path string) *Dir {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenRefusesARootThatIsALink(t *testing.T) {
	work, outside := tree(t)
	link := filepath.Join(work, "out")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Open of a link: %v, want ErrSymlink", err)
	}
	d := mustOpen(t, work)
	if _, err := d.Dir("out"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Dir of a link: %v, want ErrSymlink", err)
	}
	if _, _, err := d.Open("out/secret"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("Open through a link: %v, want ErrSymlink", err)
	}
	var pe *fs.PathError
	if _, _, err := d.Open("out/secret"); !errors.As(err, &pe) || pe.Path != "out" {
		t.Fatalf("the error names %v, want the link's own path out", err)
	}
}

func TestLinksInsideAreRefusedToo(t *testing.T) {
	work, _ := tree(t)
	os.WriteFile(filepath.Join(work, "real"), []byte("hi"), 0o600)
	os.Mkdir(filepath.Join(work, "dir"), 0o700)
	os.Symlink("real", filepath.Join(work, "alias"))
	os.Symlink("dir", filepath.Join(work, "dirlink"))
	d := mustOpen(t, work)
	for _, p := range []string{"alias", "dirlink/x"} {
		if _, _, err := d.Open(p); !errors.Is(err, ErrSymlink) {
			t.Errorf("Open(%q): %v, want ErrSymlink", p, err)
		}
	}
	if _, err := d.OpenFile("alias", os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFile for writing through a link: %v, want ErrSymlink", err)
	}
	if err := d.MkdirAll("dirlink/sub", 0o700); !errors.Is(err, ErrSymlink) {
		t.Errorf("MkdirAll through a link: %v, want ErrSymlink", err)
	}
	f, fi, err := d.Open("real")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	if string(b) != "hi" || fi.Size() != 2 || !fi.Mode().IsRegular() {
		t.Fatalf("read %q, %v", b, fi.Mode())
	}
}

func TestSpecialFilesAreNotOpened(t *testing.T) {
	work, _ := tree(t)
	if err := syscall.Mkfifo(filepath.Join(work, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(work, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := mustOpen(t, work)
	for p, kind := range map[string]string{"fifo": "a named pipe (FIFO)", "sock": "a socket", ".": "a directory"} {
		done := make(chan error, 1)
		go func() { _, _, err := d.Open(p); done <- err }()
		select {
		case err := <-done:
			var nr *NotRegularError
			if !errors.As(err, &nr) || !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) {
				t.Errorf("Open(%q): %v, want it named %s", p, err, kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%q) blocked", p)
		}
	}
}

func TestBadPaths(t *testing.T) {
	work, _ := tree(t)
	d := mustOpen(t, work)
	for _, p := range []string{"", "/etc/passwd", "../outside/secret", "a/../../x", "a\x00b"} {
		if _, _, err := d.Open(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Open(%q): %v, want EINVAL", p, err)
		}
	}
	if _, _, err := d.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing): %v, want not exist", err)
	}
}

func TestWriteRenameLinkRemove(t *testing.T) {
	work, _ := tree(t)
	d := mustOpen(t, work)
	if err := d.MkdirAll("a/b", 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := d.OpenFile("a/b/tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("data")
	f.Close()
	if err := d.Link("a/b/tmp", "a/final"); err != nil {
		t.Fatal(err)
	}
	if err := d.Link("a/b/tmp", "a/final"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second link: %v, want exist", err)
	}
	if err := d.Rename("a/b/tmp", "renamed"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("a/b"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(work, "a", "final"))
	if err != nil || string(b) != "data" {
		t.Fatalf("a/final: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(work, "a", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a/b was not removed: %v", err)
	}
	sub, err := d.Dir("a")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := sub.Name(); got != "a" {
		t.Fatalf("Name %q", got)
	}
	if _, _, err := sub.Open("nothing"); err == nil || !strings.Contains(err.Error(), "a/nothing") {
		t.Fatalf("an error below a sub-directory names its path from the top: %v", err)
	}
}

func TestWalk(t *testing.T) {
	work, outside := tree(t)
	os.MkdirAll(filepath.Join(work, "x", "y"), 0o700)
	os.WriteFile(filepath.Join(work, "x", "y", "f"), nil, 0o600)
	os.WriteFile(filepath.Join(work, "a"), nil, 0o600)
	os.Symlink(outside, filepath.Join(work, "x", "out"))
	syscall.Mkfifo(filepath.Join(work, "x", "p"), 0o600)
	var got []string
	err := mustOpen(t, work).Walk(func(rel string, fi fs.FileInfo) error {
		got = append(got, rel+" "+Kind(fi.Mode()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a a regular file", "x/out a symbolic link", "x/p a named pipe (FIFO)", "x/y/f a regular file"}
	if !slices.Equal(got, want) {
		t.Fatalf("walk\n got %q\nwant %q", got, want)
	}
}

// FuzzNothingOutsideIsReached places, at every component of a path inside a workdir, what a command
// could have put there (nofollowtest.Plant), then opens, lists and walks the workdir as the runtime does:
// nothing outside the workdir is ever read or listed, and nothing blocks.
func FuzzNothingOutsideIsReached(f *testing.F) {
	for _, s := range nofollowtest.Seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, plan []byte) {
		work, outside := nofollowtest.Tree(t)
		paths := nofollowtest.Plant(t, work, outside, plan)
		d := mustOpen(t, work)
		check := func(what string, r io.Reader) {
			b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
			if strings.Contains(string(b), nofollowtest.Secret) {
				t.Fatalf("%s read a file outside the workdir (plan %v)", what, plan)
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, p := range append(paths, "out/secret", "secret", "deep/secret", "out/artifacts/secret", "out/deep/secret") {
				if f, _, err := d.Open(p); err == nil {
					check("Open("+p+")", f)
					f.Close()
				}
				if sub, err := d.Dir(p); err == nil {
					if ns, err := sub.Names(); err == nil && slices.Contains(ns, "secret") && !slices.Contains(paths, filepath.Join(p, "secret")) {
						t.Errorf("Dir(%q) lists a directory outside the workdir (plan %v)", p, plan)
					}
					sub.Close()
				}
			}
			d.Walk(func(rel string, fi fs.FileInfo) error {
				if f, _, err := d.Open(rel); err == nil {
					check("Walk then Open("+rel+")", f)
					f.Close()
				}
				return nil
			})
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("opening or walking blocked (plan %v)", plan)
		}
	})
}
