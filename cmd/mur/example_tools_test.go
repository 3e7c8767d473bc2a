package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// TestToolsExample checks the tools example as its README section runs it, on a copy (never in the
// example's folder): the module builds from the Go source, mur check passes, and staging's pins are what
// mur list shows.
func TestToolsExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tools")
	copyDir(t, "../../deploy/examples/tools", dir)
	os.RemoveAll(filepath.Join(dir, ".murmur", "members"))
	// The README's command, run from the repository's copy of the source (the copy is outside the module).
	build := exec.Command("go", "build", "-o", filepath.Join(dir, ".murmur/store/local/wordcount/1.0.0/tool.wasm"), "../../deploy/examples/tools/wordcount")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example tool: %v\n%s", err, out)
	}
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
	// Without the built module the check says what is missing.
	os.Remove(filepath.Join(dir, ".murmur/store/local/wordcount/1.0.0/tool.wasm"))
	os.Remove(filepath.Join(lead, "murmur.lock"))
	code, out, _ = mur(t, "check", "--roster", filepath.Join(dir, "roster.yaml"))
	if code != 2 || !strings.Contains(out, "module tool.wasm is not in the artifact directory") {
		t.Errorf("mur check without the module: %d\n%s", code, out)
	}
}
