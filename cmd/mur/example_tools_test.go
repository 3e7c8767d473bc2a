package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/artifact/wasm"
)

// copyDir copies the regular files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runFormation runs `mur run --roster rosterPath` as a user does, waits up to wait for it to print its
// first door, and returns a context that ends with the run and stop, which shuts it down and checks that
// it ended cleanly.
func runFormation(t *testing.T, rosterPath string, env func(string) string, wait time.Duration) (context.Context, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var runOut, runErr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--roster", rosterPath}, env, &runOut, &runErr) }()
	for deadline := time.Now().Add(wait); !strings.Contains(runOut.String(), "/a2a"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("mur run printed no door:\n%s\n%s", runOut.String(), runErr.String())
		}
	}
	return ctx, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("mur run ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("mur run did not shut down")
		}
	}
}

// TestToolsExample checks the tools example as docs/artifacts.md runs it, on a copy (never in the
// example's folder): the module builds from the Go source, mur check passes, and staging's pins are what
// mur list shows.
func TestToolsExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tools")
	copyDir(t, "../../deploy/examples/tools", dir)
	os.RemoveAll(filepath.Join(dir, ".murmur", "members"))
	// The docs' command, run from the repository's copy of the source (the copy is outside the module).
	build := exec.Command("go", "build", "-o", filepath.Join(dir, ".murmur/store/local/wordcount/1.0.0/tool.wasm"), "../../deploy/examples/tools/wordcount")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example tool: %v\n%s", err, out)
	}
	// Compile the module into the formation's cache (.murmur/wasm-cache in its data directory) first: under
	// -race, compiling a Go module takes a minute or more, and staging then loads it instead.
	module, err := os.ReadFile(filepath.Join(dir, ".murmur/store/local/wordcount/1.0.0/tool.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := wasm.New(wasm.Config{CacheDir: filepath.Join(dir, ".murmur", "wasm-cache")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Compile(context.Background(), wasm.Call{Name: "wordcount", Module: module}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	code, out, errs := mur(t, "check", "--roster", filepath.Join(dir, "roster.yaml"))
	if code != 0 || !strings.Contains(out, "1 member(s), 0 error(s)") {
		t.Fatalf("mur check: %d\n%s%s", code, out, errs)
	}
	lead := filepath.Join(dir, "lead")
	for _, name := range []string{"local/wordcount", "local/no-secrets"} {
		if code, _, errs := mur(t, "pull", "--capsule", lead, "--roster", filepath.Join(dir, "roster.yaml"), name); code != 0 {
			t.Fatalf("mur pull %s: %s", name, errs)
		}
	}
	code, out, _ = mur(t, "list", "--capsule", lead)
	if code != 0 || !strings.Contains(out, "local/no-secrets") || !strings.Contains(out, "local/wordcount") {
		t.Errorf("mur list:\n%s", out)
	}
	// The formation runs as docs/artifacts.md shows, on a free port.
	os.Remove(filepath.Join(lead, "murmur.lock"))
	rosterPath := filepath.Join(dir, "roster.yaml")
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.ReplaceAll(string(b), "127.0.0.1:7201", freeAddr(t))), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(dir, "records"), "HOME": dir})
	// Staging compiles the WASM tool (seconds on an idle machine, a minute or more on a loaded one);
	// the deadline only keeps a hung run from hanging the suite.
	ctx, stop := runFormation(t, rosterPath, env, 5*time.Minute)
	defer stop()
	for _, tc := range []struct{ text, want string }{
		{"count to be or not to be", "6 words, 1 lines"},
		{"count my secret", "denied by policy local/no-secrets: this formation does not handle secrets"},
		{"pull local/*", `"matches":[{"artifact":"local/wordcount","runtime":"tool","description":"Counts the words`},
		{"remove local/wordcount", "not-removable: local/wordcount is declared in murmur.yaml"},
	} {
		var sout, serr bytes.Buffer
		err := run(ctx, []string{"send", "--roster", rosterPath, "--wait", tc.text}, env, &sout, &serr)
		if err != nil || !strings.Contains(sout.String(), tc.want) {
			t.Errorf("mur send %q: %v, stdout %q, stderr %q; want %q", tc.text, err, sout.String(), serr.String(), tc.want)
		}
	}
	leavesGitStatusClean(t, "tools", dir, "records")
}
