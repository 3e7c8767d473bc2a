package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/internal/fakeharness/build"
)

// mur check on a formation whose harness member has instructions, a skill and submit-plan but no
// {instructions} on its command line warns W-HARNESS-004, naming what the harness would miss; with
// {instructions} passed to a flag the same formation checks clean.
func TestCheckWarnsHarnessWithoutInstructions(t *testing.T) {
	bin, err := build.FakeHarness(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		warned        bool
	}{
		{"no placeholder", "[./fakeharness, -dialect, murmur-jsonl]", true},
		{"placeholder", "[./fakeharness, -dialect, murmur-jsonl, --, --append-system-prompt, \"{instructions}\"]", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(rel, body string) {
				p := filepath.Join(root, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte(body), 0o644)
			}
			write("roster.yaml", "formation: f\nmembers:\n  - {name: coder, capsule: ./coder, listen: '127.0.0.1:0'}\n")
			write("coder/murmur.yaml", "name: coder\ntransport: process\ninstructions: Be brief.\nskills: [local/style]\n"+
				"harness:\n  command: "+tc.command+"\n  resume: [-resume, \"{session}\"]\n  dialect: murmur-jsonl\n"+
				"capabilities: {plan: {submit: true}, shell: {allow: [expr]}}\n")
			write(".murmur/store/local/style/1.0.0/murmur.yaml", "name: local/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n")
			write(".murmur/store/local/style/1.0.0/SKILL.md", "Write in short sentences.\n")
			copyFile(t, bin, filepath.Join(root, "coder", "fakeharness"))
			env := envOf(map[string]string{"HOME": root})
			var out, errb bytes.Buffer
			if err := run(context.Background(), []string{"check", "--roster", filepath.Join(root, "roster.yaml")}, env, &out, &errb); err != nil {
				t.Fatalf("mur check: %v\n%s%s", err, out.String(), errb.String())
			}
			want := "W-HARNESS-004: member coder: " + filepath.Join(root, "coder", "murmur.yaml") +
				": no argument of harness.command holds {instructions}, so the harness never receives the system prompt the runtime would send" +
				" (the instructions, 1 skill(s), the plan guidance (capabilities.plan.submit))"
			if got := strings.Contains(out.String(), want); got != tc.warned {
				t.Errorf("warned %v, want %v:\n%s", got, tc.warned, out.String())
			}
		})
	}
}
