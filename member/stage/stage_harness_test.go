package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/peercred"
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

// mur check names each harness.env entry that would hand the harness a secret of the runtime's
// (W-HARNESS-003), written out or taken from mur's environment by name, and says why without showing it;
// other entries stage without a finding.
func TestHarnessEnvSecretFindings(t *testing.T) {
	const operator, control = "mur_check-operator-0123456789", "check-control-0123456789"
	env := map[string]string{"MUR_OPERATOR_TOKEN": operator, "MUR_CONTROL_TOKEN": control, "OPTOK": operator, "MODE": "fast"}
	getenv := func(k string) string { return env[k] }
	cred := peercred.NewKey("mur_formation-secret", "f").Credential("lead", peercred.Trusted)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "harness.sh"), []byte("#!/bin/sh\n"), 0o755)
	path := filepath.Join(dir, "murmur.yaml")
	c, err := capsule.Parse(path, []byte("name: w\ntransport: process\nharness:\n  command: [./harness.sh]\n  dialect: murmur-jsonl\n  env: [OP="+operator+
		", OPTOK, CTL="+control+", PEER="+cred+", MUR_OPERATOR_TOKEN, MODE, GREETING=hello]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range Capsule(c, "w", getenv) {
		if f.Code == CodeHarnessSecret {
			got = append(got, f.String())
		}
		for _, s := range []string{operator, control, cred} {
			if strings.Contains(f.String(), s) {
				t.Errorf("the finding shows a secret: %s", f)
			}
		}
	}
	tail := ", and the harness never gets it: %s; a harness must not hold the runtime's tokens or credentials"
	var want []string
	for _, e := range [][2]string{
		{"OP", "its value is the operator token (MUR_OPERATOR_TOKEN)"},
		{"OPTOK", "its value is the operator token (MUR_OPERATOR_TOKEN)"},
		{"CTL", "its value is the control token (MUR_CONTROL_TOKEN)"},
		{"PEER", "its value holds a member's peer credential (murp1.…)"},
		{"MUR_OPERATOR_TOKEN", "its name is one of the runtime's token variables (MUR_…TOKEN…)"},
	} {
		want = append(want, "W-HARNESS-003: member w: "+path+": harness.env "+e[0]+" is left out"+fmt.Sprintf(tail, e[1]))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("W-HARNESS-003 findings (-want +got):\n%s", diff)
	}
	if (Finding{Code: CodeHarnessSecret}).IsError() {
		t.Error("W-HARNESS-003 stops staging")
	}
}
