package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/driver"
)

// TestOfflineBuild builds mur the way a first build does, with -tags offline (the script driver alone,
// no model SDKs), and checks that it passes the hello formation and refuses, in mur check and in
// mur run, a formation whose member starts on openai, naming the command that installs a mur serving it.
func TestOfflineBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mur with -tags " + driver.OfflineTag + "; run it without -short")
	}
	root := t.TempDir()
	mur := filepath.Join(root, "mur")
	if out, err := exec.Command("go", "build", "-tags", driver.OfflineTag, "-o", mur, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", driver.OfflineTag, err, out)
	}
	murmur := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(mur, args...)
		cmd.Env = append(os.Environ(), "MUR_TEST_KEY=sk-test")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatalf("mur %v: %v", args, err)
		}
		return string(out), 0
	}

	if out, code := murmur("check", "--roster", "../../deploy/examples/hello/roster.yaml"); code != 0 || !strings.Contains(out, "2 member(s), 0 error(s), 0 warning(s)") {
		t.Errorf("mur check on hello: exit %d\n%s", code, out)
	}

	for rel, body := range map[string]string{
		"roster.yaml":      "formation: models\nmembers:\n  - {name: lead, capsule: ./lead}\n",
		"lead/murmur.yaml": "name: lead\ninference:\n  driver: gpt\n  choices:\n    gpt: {driver: openai, model: m, credential: env:MUR_TEST_KEY}\n",
	} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roster := filepath.Join(root, "roster.yaml")
	want := "E-DRV-001: member lead: " + filepath.Join(root, "lead", "murmur.yaml") + `: inference.driver gpt: driver "openai" is left out of this build of mur: it was built with -tags offline, which serves the script driver alone; install the mur that serves every driver, from the repository root: go install ./cmd/mur`
	out, code := murmur("check", "--roster", roster)
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("mur check: exit %d, want 2 and %q in\n%s", code, want, out)
	}
	out, code = murmur("run", "--roster", roster, "--data-dir", filepath.Join(root, "data"))
	if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "staging failed") {
		t.Errorf("mur run: exit %d, want 2, staging failed and %q in\n%s", code, want, out)
	}
}
