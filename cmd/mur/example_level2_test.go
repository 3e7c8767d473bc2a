package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/artifact/wasm"
)

// TestLevel2Example runs the WIT level 2 example as docs/artifacts.md does, on a copy (never in the
// example's folder), offline on lead's script: the four modules build from their Go source, mur check
// passes, and the three level-2 artifacts do what the docs say: the policy hook has the model deny an rm
// and allow an echo, the grader has the model find a weak answer and reopens the task, and local/loud
// pulls its companion, which the agent calls next. mur check then refuses a level-3 artifact
// (E-WIT-LEVEL-001) and warns of hooks that may ask a model without capabilities.hooks.inference
// (W-HOOK-001).
func TestLevel2Example(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "level2")
	copyDir(t, "../../deploy/examples/level2", dir)
	os.RemoveAll(filepath.Join(dir, ".murmur", "members"))
	// The docs' build, from the repository's copy of the sources (the copy is outside the module), and
	// each module compiled into the formation's cache first: under -race a compilation takes many seconds.
	r, err := wasm.New(wasm.Config{CacheDir: filepath.Join(dir, ".murmur", "wasm-cache")})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"loud", "shout", "safe-shell", "grader"} {
		out := filepath.Join(dir, ".murmur/store/local", m, "1.0.0/module.wasm")
		build := exec.Command("go", "build", "-o", out, "../../deploy/examples/level2/"+m)
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", m, err, b)
		}
		module, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Compile(context.Background(), wasm.Call{Name: m, Module: module}); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	rosterPath := filepath.Join(dir, "roster.yaml")
	code, out, errs := mur(t, "check", "--roster", rosterPath)
	if code != 0 || !strings.Contains(out, "1 member(s), 0 error(s)") || strings.Contains(out+errs, "W-HOOK-001") {
		t.Fatalf("mur check: %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.ReplaceAll(string(b), "127.0.0.1:7301", freeAddr(t))), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(dir, "records"), "HOME": dir})
	ctx, stop := runFormation(t, rosterPath, env, 5*time.Minute)
	for _, tc := range []struct{ text, want string }{
		{"loud hello there", "HELLO THERE!"},
		{"run echo hi", "ok: exit_code: 0"},
		{"run rm notes.txt", "refused: denied by policy local/safe-shell: the model was asked and said no: rm deletes files, and nothing here asked for that"},
		// The first answer ("I am not sure.") is graded weak, the task reopened, the second answer kept.
		{"what is the capital of France?", "Paris is the capital of France."},
	} {
		var sout, serr bytes.Buffer
		err := run(ctx, []string{"send", "--roster", rosterPath, "--wait", tc.text}, env, &sout, &serr)
		if err != nil || !strings.Contains(sout.String(), tc.want) {
			t.Errorf("mur send %q: %v, stdout %q, stderr %q; want %q", tc.text, err, sout.String(), serr.String(), tc.want)
		}
	}
	stop()
	trace := filepath.Join(dir, "records")
	var all string
	filepath.WalkDir(trace, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "trace.jsonl" {
			b, _ := os.ReadFile(p)
			all += string(b)
		}
		return nil
	})
	for _, want := range []string{`"type":"task_reopened"`, `"hook":"local/grader"`, `"via":"manage"`} {
		if !strings.Contains(all, want) {
			t.Errorf("the records lack %s", want)
		}
	}
	leavesGitStatusClean(t, "level2", dir, "records")

	// mur check: a level-3 artifact does not fit; hooks that may ask a model without the grant are warned of.
	lead := filepath.Join(dir, "lead", "murmur.yaml")
	y, _ := os.ReadFile(lead)
	os.WriteFile(lead, []byte(strings.Replace(string(y), "  hooks: {inference: true}\n", "", 1)), 0o644)
	if code, out, errs := mur(t, "check", "--roster", rosterPath); code != 0 || strings.Count(out+errs, "W-HOOK-001") != 2 {
		t.Errorf("mur check without capabilities.hooks.inference: %d, want 0 and W-HOOK-001 for each of the two hooks\n%s%s", code, out, errs)
	}
	grader := filepath.Join(dir, ".murmur/store/local/grader/1.0.0/murmur.yaml")
	g, _ := os.ReadFile(grader)
	os.WriteFile(grader, []byte(strings.Replace(string(g), "wit_level: 2", "wit_level: 3", 1)), 0o644)
	if code, out, errs := mur(t, "check", "--roster", rosterPath); code != 2 || !strings.Contains(out+errs, "E-WIT-LEVEL-001") ||
		!strings.Contains(out+errs, "needs WIT level 3, and this mur serves level 2") {
		t.Errorf("mur check with a level-3 hook: %d, want 2 and E-WIT-LEVEL-001\n%s%s", code, out, errs)
	}
}
