// Package nofollowtest plants, inside a workdir, what a command could have put there to lead the runtime
// out of it or to block it, for the fuzz tests of every package that opens paths in a workdir.
package nofollowtest

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Secret is the content of the files outside the workdir; no read the runtime makes may return it.
const Secret = "SECRET-outside-the-workdir"

// Tree makes base/work (the workdir) and base/outside, which holds Secret in outside/secret,
// outside/artifacts/secret and outside/deep/secret; it returns both directories.
func Tree(t testing.TB) (work, outside string) {
	t.Helper()
	base := t.TempDir()
	work, outside = filepath.Join(base, "work"), filepath.Join(base, "outside")
	for _, d := range []string{work, filepath.Join(outside, "artifacts"), filepath.Join(outside, "deep")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"secret", "artifacts/secret", "deep/secret"} {
		if err := os.WriteFile(filepath.Join(outside, f), []byte(Secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return work, outside
}

// Names are the components Plant builds paths from, in turn.
var Names = []string{"out", "artifacts", "secret", "deep"}

// Plant walks down from work, one component of Names per byte of plan, and places at each what the
// byte says (its value modulo 8): a directory (and goes on below it), a regular file, a link out of the
// workdir, a link to the workdir, a link to "..", a FIFO, a socket, a device (root only). It stops at the
// first that is not a directory and returns the paths it placed, relative to work.
func Plant(t testing.TB, work, outside string, plan []byte) []string {
	t.Helper()
	if len(plan) > 8 {
		plan = plan[:8]
	}
	cur, rel := work, ""
	var paths []string
	// A plant that failed would leave the fuzz test checking less than its plan says.
	must := func(err error) {
		if err != nil {
			t.Fatalf("planting %s: %v", rel, err)
		}
	}
	for i, b := range plan {
		name := Names[i%len(Names)]
		p := filepath.Join(cur, name)
		rel = filepath.Join(rel, name)
		paths = append(paths, rel)
		switch b % 8 {
		case 0:
			must(os.Mkdir(p, 0o700))
			cur = p
			continue
		case 1:
			must(os.WriteFile(p, []byte("inside"), 0o600))
		case 2:
			must(os.Symlink(outside, p))
		case 3:
			must(os.Symlink(work, p))
		case 4:
			must(os.Symlink("..", p))
		case 5:
			must(syscall.Mkfifo(p, 0o600))
		case 6:
			if ln, err := net.Listen("unix", p); err == nil {
				t.Cleanup(func() { ln.Close() })
			}
		case 7:
			// /dev/null's numbers. Root only: without it (EPERM) nothing is placed, as for a socket whose
			// path is too long.
			_ = syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|3)
		}
		return paths
	}
	return paths
}

// Seeds are plans worth trying first: out/ a link out, out/artifacts a link out, a FIFO and a socket
// below out/, a device, links to the workdir and to "..".
var Seeds = [][]byte{{2}, {0, 2}, {0, 0, 5}, {0, 0, 6}, {0, 0, 0, 7}, {3}, {0, 4}, {0, 0, 1}, {0, 0, 0, 2}}
