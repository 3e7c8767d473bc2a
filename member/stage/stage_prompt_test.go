package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
)

// mur check warns (W-HARNESS-004) where a harness would be sent a system prompt (instructions, skills,
// the plan guidance) but its command line has no {instructions} to receive it, and names what it
// misses; a capsule with nothing to send, or with {instructions} in any argument, gets no warning.
func TestHarnessPromptFinding(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "harness.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "murmur.yaml")
	tail := ", so the harness never receives the system prompt the runtime would send (%s); pass it to the harness's system-prompt flag, such as Claude Code's --append-system-prompt \"{instructions}\""
	for _, tc := range []struct{ name, command, extra, want string }{
		{"nothing to send", "./harness.sh", "", ""},
		{"instructions", "./harness.sh", "instructions: Be brief.\n",
			"W-HARNESS-004: member w: " + path + ": no argument of harness.command holds {instructions}" + fmt.Sprintf(tail, "the instructions")},
		{"skills and plans", "./harness.sh", "skills: [local/style]\ncapabilities: {plan: {submit: true}}\n",
			"W-HARNESS-004: member w: " + path + ": no argument of harness.command holds {instructions}" + fmt.Sprintf(tail, "1 skill(s), the plan guidance (capabilities.plan.submit)")},
		{"received", "./harness.sh, --append-system-prompt, '{instructions}'", "instructions: Be brief.\n", ""},
		{"received inside an argument", "./harness.sh, '--system={instructions}'", "instructions: Be brief.\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := capsule.Parse(path, []byte("name: w\ntransport: process\nharness: {command: ["+tc.command+"], dialect: murmur-jsonl}\n"+tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range Capsule(c, "w", os.Getenv) {
				if f.Code == CodeHarnessPrompt {
					got = append(got, f.String())
					if f.IsError() {
						t.Error("W-HARNESS-004 stops staging")
					}
				}
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("W-HARNESS-004 findings (-want +got):\n%s", diff)
			}
		})
	}
}
