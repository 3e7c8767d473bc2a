package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/artifact"
)

// artifactProject is a capsule with a project store beside it holding local/echo 1.0.0 and 1.1.0 and
// local/policy 1.0.0 (a hook).
func artifactProject(t *testing.T, capsuleYAML string) (root, capsule string) {
	t.Helper()
	root = t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		d := "cap/.murmur/store/local/echo/" + v + "/"
		write(d+"murmur.yaml", fmt.Sprintf("name: local/echo\nversion: %s\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\n", v))
		write(d+"tool.wasm", "\x00asm\x01\x00\x00\x00"+v)
	}
	write("cap/.murmur/store/local/policy/1.0.0/murmur.yaml", "name: local/policy\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./p.sh]\nevents: [on-tool-call]\n")
	write("cap/.murmur/store/local/policy/1.0.0/p.sh", "#!/bin/sh\n")
	write("cap/murmur.yaml", capsuleYAML)
	return root, filepath.Join(root, "cap")
}

const plainCapsule = "name: cap\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n"

func mur(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, envOf(map[string]string{"HOME": t.TempDir()}), &out, &errb)
	code := exitCodeFor(err, &errb)
	return code, out.String(), errb.String()
}

func TestPullAndList(t *testing.T) {
	_, capsule := artifactProject(t, plainCapsule)
	lock := filepath.Join(capsule, "murmur.lock")
	code, out, _ := mur(t, "list", "--capsule", capsule)
	if code != 0 || out != "no artifacts are pinned in "+lock+"\n" {
		t.Errorf("empty list: %d %q", code, out)
	}
	code, out, errs := mur(t, "pull", "--capsule", capsule, "local/echo")
	digest, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0"))
	want := "pinned local/echo@1.1.0 (" + digest + ") from the project store in " + lock + "\n" +
		"local/echo is not declared in " + filepath.Join(capsule, "murmur.yaml") + " yet: add it under tools:, skills: or hooks: (by its role) to give it to the session\n"
	if code != 0 || out != want {
		t.Fatalf("pull: exit %d\n%s\nwant\n%s%s", code, out, want, errs)
	}
	l, err := artifact.ReadLock(lock)
	if err != nil || len(l.Pins) != 1 || l.Pins[0].Origin != artifact.OriginOperator || l.Pins[0].Digest != digest {
		t.Fatalf("lock %+v %v", l, err)
	}
	// A hook is pinned too (the operator's to pin).
	if code, _, errs := mur(t, "pull", "--capsule", capsule, "local/policy@1.0.0"); code != 0 {
		t.Fatalf("pull hook: %d %s", code, errs)
	}
	code, out, _ = mur(t, "list", "--capsule", capsule)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ARTIFACT") ||
		!strings.Contains(lines[1], "local/echo") || !strings.Contains(lines[1], "1.1.0") || !strings.Contains(lines[1], "operator") ||
		!strings.Contains(lines[1], "project store") || !strings.HasSuffix(lines[1], digest) || !strings.Contains(lines[2], "local/policy") {
		t.Errorf("list:\n%s", out)
	}
	for _, name := range []string{"session-status", "pull-artifact", "share-file"} {
		if strings.Contains(out, name) {
			t.Errorf("mur list shows the runtime-provided %s", name)
		}
	}

	// Another version: the conflict, and the lock unchanged.
	before, _ := os.ReadFile(lock)
	code, _, errs = mur(t, "pull", "--capsule", capsule, "local/echo@1.0.0")
	if code != 2 || !strings.Contains(errs, "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.1.0, not 1.0.0") {
		t.Errorf("conflict: %d %s", code, errs)
	}
	for _, tc := range []struct{ args, want string }{
		{"local/pull-artifact", `E-CAP-013: local/pull-artifact: its tool name "pull-artifact" is reserved`},
		{"local/nothing", "local/nothing is in none of the places this capsule may pull from (the project store, the global store)"},
		{"echo", `"echo" is not a full artifact name: it has no scope; write scope/name, such as local/echo`},
	} {
		code, _, errs := mur(t, "pull", "--capsule", capsule, tc.args)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("pull %s: %d %s", tc.args, code, errs)
		}
	}
	if after, _ := os.ReadFile(lock); !bytes.Equal(before, after) {
		t.Errorf("a refused pull changed murmur.lock")
	}
	// A lock edited by hand into invalid YAML is an error with its line, for list and pull alike, and is
	// not written over.
	os.WriteFile(lock, []byte("pins:\n  - name: [\n"), 0o644)
	for _, args := range [][]string{{"list", "--capsule", capsule}, {"pull", "--capsule", capsule, "local/echo"}} {
		code, _, errs := mur(t, args...)
		if code != 2 || !strings.Contains(errs, lock+":") {
			t.Errorf("%v on a broken lock: %d %s", args, code, errs)
		}
	}
	if after, _ := os.ReadFile(lock); string(after) != "pins:\n  - name: [\n" {
		t.Errorf("the broken lock was written over")
	}
}

func TestCheckArtifacts(t *testing.T) {
	_, capsule := artifactProject(t, plainCapsule+"tools: [local/echo@1.0.0]\nhooks: [local/policy]\n")
	mf := filepath.Join(capsule, "murmur.yaml")
	code, out, _ := mur(t, "check", "--capsule", capsule)
	if code != 0 || !strings.Contains(out, "0 error(s)") {
		t.Fatalf("check: %d\n%s", code, out)
	}
	// mur check writes nothing.
	if _, err := os.Stat(filepath.Join(capsule, "murmur.lock")); err == nil {
		t.Errorf("mur check wrote murmur.lock")
	}
	if code, _, errs := mur(t, "pull", "--capsule", capsule, "local/echo@1.0.0"); code != 0 {
		t.Fatal(errs)
	}
	pinned, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0"))
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0/tool.wasm"), []byte("\x00asm\x01\x00\x00\x00changed"), 0o644)
	now, _ := artifact.Digest(filepath.Join(capsule, ".murmur/store/local/echo/1.0.0"))
	code, out, _ = mur(t, "check", "--capsule", capsule)
	want := "E-ART-002: " + mf + ": tools[0]: murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0 with digest " + pinned +
		", but the copy in the project store has digest " + now + ", so its files changed after it was pinned"
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("check after a change: %d\n%s\nwant %s", code, out, want)
	}
	// A reserved name is reported before anything is read: the broken store entry is not mentioned.
	_, capsule = artifactProject(t, plainCapsule+"tools: [local/echo, murmur/delegate-task]\n")
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml"), []byte("nope: 1\n"), 0o644)
	code, out, _ = mur(t, "check", "--capsule", capsule)
	if code != 2 || !strings.Contains(out, `E-CAP-013: `+filepath.Join(capsule, "murmur.yaml")+`: tools[1]: murmur/delegate-task: its tool name "delegate-task" is reserved`) ||
		strings.Contains(out, "E-ART-001") {
		t.Errorf("reserved: %d\n%s", code, out)
	}
	// With the reserved name gone, the corrupt store entry is an error naming the file and line.
	_, capsule = artifactProject(t, "name: cap\ntransport: process\nharness: {command: [/bin/true], dialect: murmur-jsonl}\ntools: [local/echo]\ncapabilities:\n  install: {tool: [local/*]}\n")
	os.WriteFile(filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml"), []byte("nope: 1\n"), 0o644)
	code, out, _ = mur(t, "check", "--capsule", capsule)
	for _, want := range []string{
		"E-ART-001: " + filepath.Join(capsule, "murmur.yaml") + ": tools[0]: the copy of local/echo@1.1.0 in the project store cannot be used:",
		filepath.Join(capsule, ".murmur/store/local/echo/1.1.0/murmur.yaml") + ":1:",
		"E-CAP-014: " + filepath.Join(capsule, "murmur.yaml") + ": capabilities.install is declared under transport: process",
	} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("check: %d lacks %q:\n%s", code, want, out)
		}
	}
}
