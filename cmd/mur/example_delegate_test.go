package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDelegateExample runs the delegate example as docs/tools.md does, on a copy: both
// sub-capsules answer in one continuation, and a plan of three shell steps runs with references.
func TestDelegateExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "delegate")
	copyDir(t, "../../deploy/examples/delegate", dir)
	rosterPath := filepath.Join(dir, "roster.yaml")
	if code, out, errs := mur(t, "check", "--roster", rosterPath); code != 0 || !strings.Contains(out, "1 member(s), 0 error(s)") {
		t.Fatalf("mur check: %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.ReplaceAll(string(b), "127.0.0.1:7301", freeAddr(t))), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(dir, "records"), "HOME": dir})
	ctx, stop := runFormation(t, rosterPath, env, time.Minute)
	defer stop()
	for _, tc := range []struct{ text, want string }{
		{"digest the quick brown fox jumps over the lazy dog", "summarizer: summary: the quick brown fox jumps / counter: 9 words"},
		{"compute 6 7", `"id":"report","tool":"echo","status":"ok","output":"exit_code: 0\nstatus: ok\noutput_bytes: 31\noutput_shown: all\n\nsum exited 0, product exited 0\n"`},
	} {
		var sout, serr bytes.Buffer
		err := run(ctx, []string{"send", "--roster", rosterPath, "--wait", tc.text}, env, &sout, &serr)
		if err != nil || !strings.Contains(sout.String(), tc.want) {
			t.Errorf("mur send %q: %v, stdout %q, stderr %q; want %q", tc.text, err, sout.String(), serr.String(), tc.want)
		}
	}
}
