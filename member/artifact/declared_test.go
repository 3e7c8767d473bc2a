package artifact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStageDeclared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	project, global := filepath.Join(dir, "p"), filepath.Join(dir, "g")
	stores := []Store{{ProjectStore, project}, {GlobalStore, global}}
	lock := filepath.Join(dir, LockFile)
	putTool(t, project, "local/echo", "1.0.0", 1)
	putTool(t, global, "local/echo", "1.1.0", 1)
	putSkill(t, project, "local/style", "1.0.0", "Be brief.")
	putHook(t, project, "local/policy", "1.0.0")
	d := Declared{Tools: []string{"local/echo"}, Skills: []string{"local/style@1.0.0"}, Hooks: []string{"local/policy"}}
	got, err := StageDeclared(ctx, stores, lock, d, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Ref().String() != "local/echo@1.1.0" || got[0].Place != GlobalStore || got[2].Manifest.Runtime != RuntimeHook {
		t.Fatalf("staged %+v", got)
	}
	l, _ := ReadLock(lock)
	if len(l.Pins) != 3 || l.Pins[0].Origin != OriginOperator {
		t.Errorf("pins %+v", l.Pins)
	}
	// The pin decides the version from now on, even once a newer one is held.
	putTool(t, project, "local/echo", "1.2.0", 1)
	got, err = StageDeclared(ctx, stores, lock, d, false)
	if err != nil || got[0].Manifest.Version != "1.1.0" {
		t.Fatalf("again: %v %v", got, err)
	}

	// A changed file: E-ART-002 with both digests.
	pinned, _ := l.Get("local/echo")
	os.WriteFile(filepath.Join(global, "local", "echo", "1.1.0", "tool.wasm"), []byte(wasmHead+"changed"), 0o644)
	now, _ := Digest(filepath.Join(global, "local", "echo", "1.1.0"))
	_, err = StageDeclared(ctx, stores, lock, d, true)
	want := "E-ART-002: tools[0]: murmur.lock conflict for 'local/echo': murmur.lock pins version 1.1.0 with digest " + pinned.Digest +
		", but the copy in the global store has digest " + now + ", so its files changed after it was pinned; restore the pinned files, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) to accept the new ones"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrConflict) {
		t.Errorf("errors.Is(err, ErrConflict) = false")
	}
}

func TestStageDeclaredRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	project := filepath.Join(dir, "p")
	stores := []Store{{ProjectStore, project}}
	lock := filepath.Join(dir, LockFile)
	putTool(t, project, "local/echo", "1.0.0", 1)
	putTool(t, project, "local/new", "2.0.0", 3)
	putSkill(t, project, "local/style", "1.0.0", "x")
	for _, tc := range []struct {
		name string
		d    Declared
		lock string
		want string
	}{
		{"reserved, before anything is read", Declared{Tools: []string{"murmur/delegate-task", "local/missing"}, Hooks: []string{"ana/pull-artifact@1.0.0"}}, "pins: [\n",
			`E-CAP-013: tools[0]: murmur/delegate-task: its tool name "delegate-task" is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it` + "\n" +
				`E-CAP-013: hooks[0]: ana/pull-artifact: its tool name "pull-artifact" is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it`},
		{"not held", Declared{Tools: []string{"local/missing@1.0.0"}}, "",
			"E-ART-001: tools[0]: local/missing@1.0.0 is in none of the places this capsule may pull from (the project store)"},
		{"another role", Declared{Tools: []string{"local/style"}}, "",
			"E-ART-001: tools[0]: local/style@1.0.0 is a skill, and tools: lists only tools; move it under the key of its role"},
		{"does not fit", Declared{Tools: []string{"local/new@2.0.0"}}, "",
			"E-WIT-LEVEL-001: tools[0]: local/new@2.0.0 needs WIT level 3, and this mur serves level 2; no version of local/new that this capsule may pull fits"},
		{"two with one tool name", Declared{Tools: []string{"local/echo", "acme/echo"}}, "",
			"E-ART-001: tools[1]: acme/echo has the tool name echo, as local/echo does; give each artifact its own"},
		{"invalid murmur.lock", Declared{Tools: []string{"local/echo"}}, "pins: [\n", "E-ART-003: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(lock)
			if tc.lock != "" {
				os.WriteFile(lock, []byte(tc.lock), 0o644)
			}
			before, _ := os.ReadFile(lock)
			_, err := StageDeclared(ctx, stores, lock, tc.d, true)
			if err == nil {
				t.Fatal("staged; want an error")
			}
			if strings.HasSuffix(tc.want, ": ") {
				if !strings.HasPrefix(err.Error(), tc.want+lock+":") {
					t.Errorf("err = %v, want %s<the lock's error>", err, tc.want)
				}
			} else if err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
			if after, _ := os.ReadFile(lock); string(after) != string(before) {
				t.Errorf("a refused staging changed murmur.lock")
			}
		})
	}
}

// Staging a capsule whose murmur.lock already pins every declared artifact as the operator writes
// nothing and takes no flock: a capsule on a read-only file system (a container's formation mount,
// mur export's ConfigMap) stages. Here the flock's file cannot be opened (a directory stands in its
// place, which stops root too); a lock that still needs a pin reports that, naming the file.
func TestStageDeclaredReadOnlyLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := []Store{{ProjectStore, filepath.Join(dir, "p")}}
	lock := filepath.Join(dir, LockFile)
	putTool(t, stores[0].Dir, "local/echo", "1.0.0", 1)
	putSkill(t, stores[0].Dir, "local/style", "1.0.0", "Be brief.")
	d := Declared{Tools: []string{"local/echo"}}
	if _, err := StageDeclared(ctx, stores, lock, d, true); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(lock)
	os.Remove(flockPath(lock))
	if err := os.Mkdir(flockPath(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := StageDeclared(ctx, stores, lock, d, true); err != nil || len(got) != 1 {
		t.Fatalf("staging with every pin in place: %v %v", got, err)
	}
	if after, _ := os.ReadFile(lock); string(after) != string(before) {
		t.Errorf("murmur.lock was rewritten")
	}
	d.Skills = []string{"local/style@1.0.0"}
	_, err := StageDeclared(ctx, stores, lock, d, true)
	var de *DeclaredError
	if !errors.As(err, &de) || de.Code != CodeLockInvalid || !strings.Contains(err.Error(), flockPath(lock)) {
		t.Errorf("staging a new pin without a writable lock: %v", err)
	}
}
