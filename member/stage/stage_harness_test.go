package stage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/capsule"
)

// mur check validates a harness: a command that is no executable file is E-HARNESS-001, naming it and
// what to write; a present one stages without it, and without driver findings (the harness has none).
func TestHarnessFindings(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "harness.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
	load := func(command string) *capsule.Capsule {
		t.Helper()
		c, err := capsule.Parse(filepath.Join(dir, "murmur.yaml"), []byte("name: w\ntransport: process\nharness: {command: ["+command+"], dialect: murmur-jsonl}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	codes := func(fs []Finding, code string) []string {
		var out []string
		for _, f := range fs {
			if f.Code == code || strings.HasPrefix(f.Code, "E-DRV") {
				out = append(out, f.String())
			}
		}
		return out
	}
	if got := codes(Capsule(load("./harness.sh"), "w", os.Getenv), CodeHarnessMissing); len(got) != 0 {
		t.Errorf("an executable harness: %q", got)
	}
	for _, tc := range []struct{ command, want string }{
		{"./missing", "E-HARNESS-001: member w: " + filepath.Join(dir, "murmur.yaml") + ": harness.command: " + filepath.Join(dir, "missing") + ": no such file; write the harness's path, absolute or relative to the capsule directory"},
		{"./notes.txt", "E-HARNESS-001: member w: " + filepath.Join(dir, "murmur.yaml") + ": harness.command: " + filepath.Join(dir, "notes.txt") + " is not an executable file; chmod +x it or name another"},
		{"no-such-harness-here", "E-HARNESS-001: member w: " + filepath.Join(dir, "murmur.yaml") + ": harness.command: no-such-harness-here is in none of /usr/local/bin, /usr/bin, /bin; write its absolute path, such as /home/you/.local/bin/no-such-harness-here"},
	} {
		got := codes(Capsule(load(tc.command), "w", os.Getenv), CodeHarnessMissing)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.command, got, tc.want)
		}
		if !(Finding{Code: CodeHarnessMissing}).IsError() {
			t.Error("E-HARNESS-001 does not stop staging")
		}
	}
}
