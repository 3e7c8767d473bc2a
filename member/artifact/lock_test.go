package artifact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ignoreRaw = cmpopts.IgnoreUnexported(Lock{})

func TestLockRoundTrip(t *testing.T) {
	l := &Lock{}
	fetched := testPin("acme/fmt", "1.2.0")
	fetched.Origin, fetched.Source, fetched.Owner = OriginAgent, "github:acme/artifacts", 4242
	for _, p := range []Pin{testPin("local/echo", "1.0.0"), fetched, testPin("local/bash", "0.1.0-rc.1")} {
		if err := l.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	want := lockHeader + `pins:
  - name: acme/fmt
    version: 1.2.0
    digest: ` + fetched.Digest + `
    origin: agent
    source: github:acme/artifacts
    owner: 4242
  - name: local/bash
    version: 0.1.0-rc.1
    digest: ` + fakeDigest("local/bash@0.1.0-rc.1") + `
    origin: operator
    source: project store
  - name: local/echo
    version: 1.0.0
    digest: ` + fakeDigest("local/echo@1.0.0") + `
    origin: operator
    source: project store
owners:
  acme: 4242
`
	if diff := cmp.Diff(want, string(l.Marshal())); diff != "" {
		t.Errorf("Marshal (-want +got):\n%s", diff)
	}

	path := filepath.Join(t.TempDir(), LockFile)
	if err := WriteLock(path, l); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, back, ignoreRaw); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".murmur.lock.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// A missing lock is an empty one; a lock of comments only too; so is an emptied one written back.
	if l, err := ReadLock(filepath.Join(t.TempDir(), LockFile)); err != nil || len(l.Pins) != 0 {
		t.Errorf("missing lock: %+v, %v", l, err)
	}
	if l, err := ParseLock("murmur.lock", []byte(lockHeader)); err != nil || len(l.Pins) != 0 {
		t.Errorf("comments only: %+v, %v", l, err)
	}
	if l, err := ParseLock("murmur.lock", (&Lock{}).Marshal()); err != nil || len(l.Pins) != 0 {
		t.Errorf("empty lock: %+v, %v", l, err)
	}
}

func TestLockAddRemove(t *testing.T) {
	l := &Lock{}
	agent := testPin("local/echo", "1.0.0")
	agent.Origin = OriginAgent
	if err := l.Add(agent); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(agent); err != nil {
		t.Fatalf("the same pin again: %v", err)
	}
	if err := l.Add(testPin("local/echo", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if p, _ := l.Get("local/echo"); p.Origin != OriginOperator {
		t.Errorf("the operator pinning an agent's pin leaves origin %s, want operator", p.Origin)
	}
	if p, ok := l.Remove("local/echo"); !ok || p.Version != "1.0.0" || len(l.Pins) != 0 {
		t.Errorf("Remove = %+v, %v; pins %v", p, ok, l.Pins)
	}
	if _, ok := l.Remove("local/echo"); ok {
		t.Error("removed twice")
	}
}

// TestLockConflict checks SPEC's "murmur.lock conflict for '<name>': …" for both ways a pin conflicts,
// and that the lock is left as it was.
func TestLockConflict(t *testing.T) {
	l := &Lock{}
	pinned := testPin("local/echo", "1.0.0")
	l.Add(pinned)
	before := string(l.Marshal())

	other := testPin("local/echo", "2.0.0")
	err := l.Add(other)
	want := "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0, not 2.0.0; pull local/echo@1.0.0 to use the pinned version, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) and pull again"
	if err == nil || err.Error() != want || !errors.Is(err, ErrConflict) {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	changed := pinned
	changed.Digest, changed.Source = fakeDigest("changed"), GlobalStore
	err = l.Add(changed)
	want = "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0 with digest " + pinned.Digest +
		", but the copy in the global store has digest " + changed.Digest +
		", so its files changed after it was pinned; restore the pinned files, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) to accept the new ones"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if err := l.Verify(changed); err == nil || err.Error() != want {
		t.Errorf("Verify = %v\nwant %s", err, want)
	}
	if err := l.Verify(pinned); err != nil {
		t.Errorf("Verify(the pin itself) = %v", err)
	}
	if string(l.Marshal()) != before {
		t.Error("a refused pin changed the lock")
	}
}

func TestLockRefusesReservedAndOtherOwner(t *testing.T) {
	l := &Lock{}
	err := l.Add(testPin("ana/pull-artifact", "1.0.0"))
	want := `E-CAP-013: ana/pull-artifact: its tool name "pull-artifact" is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it`
	if err == nil || err.Error() != want || !errors.Is(err, ErrReserved) {
		t.Errorf("err = %v\nwant %s", err, want)
	}

	first := testPin("acme/fmt", "1.0.0")
	first.Source, first.Owner = "github:acme/artifacts", 4242
	if err := l.Add(first); err != nil {
		t.Fatal(err)
	}
	second := testPin("acme/lint", "1.0.0")
	second.Source, second.Owner = "github:acme/artifacts", 999
	err = l.Add(second)
	want = "E-REG-010: github:acme/artifacts answers for GitHub owner id 999, but murmur.lock records owner id 4242 for scope acme; the repository may have changed hands: check it, then point the scope at the right repository in .murmur/sources.yaml, or (trusting the new owner) change the scope's owner in murmur.lock"
	if err == nil || err.Error() != want || !errors.Is(err, ErrOwner) {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	// The owner stays recorded once the scope's last pin is gone.
	l.Remove("acme/fmt")
	if err := l.Add(second); !errors.Is(err, ErrOwner) {
		t.Errorf("after removing the pin: %v, want E-REG-010", err)
	}
}

// TestLockHandEditedInvalid: every problem of a hand-edited lock is reported with its line, and an
// update of it fails without touching the file.
func TestLockHandEditedInvalid(t *testing.T) {
	d64 := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"values", `pins:
  - name: local/echo
    version: 1.0
    digest: sha256:abc
    origin: operater
    source: project store
  - name: ana/pull-artifact
    version: 1.0.0
    digest: sha256:` + d64 + `
    origin: agent
    source: project store
  - name: acme/fmt
    version: 1.0.0
    digest: sha256:` + d64 + `
    origin: agent
    source: github:acme/x
  - name: local/echo
    version: 1.0.0
    digest: sha256:` + d64 + `
    origin: agent
    source: global store
    owner: 7
owners:
  acme: 0
extra: 1
`, []string{
			`:3: pins[0] version "1.0" is not a full semantic version; write MAJOR.MINOR.PATCH, such as 1.0.0`,
			`:4: pins[0] digest "sha256:abc" is not a digest; write sha256: and 64 lowercase hex digits, as mur wrote it (mur pull pins it again)`,
			`:5: pins[0].origin "operater" is not one of operator, agent; write origin: operator or origin: agent; did you mean "operator"?`,
			`:7: pins[1] E-CAP-013: ana/pull-artifact: its tool name "pull-artifact" is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it; remove this pin: a runtime-provided tool is never pinned`,
			`:12: pins[2] was fetched from github:acme/x but has no owner; add owner: with the GitHub owner id it was fetched from, or remove the pin and pull it again`,
			`:22: pins[3] has an owner, but owner is for pins fetched from a github: source, not the global store; remove owner`,
			`:24: owners.acme is 0, which is no GitHub owner id; write the owner's id, such as acme: 4242`,
			`:25: unknown key "extra" at the top level; known keys: pins, owners`,
		}},
		{"duplicate and missing", `pins:
  - name: local/echo
    version: 1.0.0
    digest: sha256:` + d64 + `
    origin: agent
    source: project store
  - name: local/echo
    version: 1.0.0
    digest: sha256:` + d64 + `
    origin: agent
    source: project store
  - {name: local/x, version: 1.0.0, orign: agent}
`, []string{
			`:7: pins lists local/echo twice (first at line 2); keep one pin per name`,
			`:12: unknown key "orign" in pins[2]; known keys: name, version, digest, origin, source, owner; did you mean "origin"?`,
			`:12: pins[2] has no digest; add digest:, or remove the pin and pin the artifact again with mur pull`,
			`:12: pins[2] has no source; add source:, or remove the pin and pin the artifact again with mur pull`,
		}},
		{"syntax", "pins:\n  - name: local/echo\n   version: 1.0.0\n", []string{
			`:3: not valid YAML: did not find expected '-' indicator; fix the syntax there: indent with spaces only, and quote text that holds ": " or starts with one of {[*&!|>%@'"`,
		}},
		{"pins not a list", "pins: local/echo\n", []string{
			`:1: pins must be a list, not "local/echo"; write pins: [a, b], or one "- item" line per entry`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), LockFile)
			os.WriteFile(path, []byte(tc.text), 0o644)
			want := path + strings.Join(tc.want, "\n"+path)
			called := false
			err := UpdateLock(context.Background(), path, func(l *Lock) error {
				called = true
				return l.Add(testPin("local/new", "1.0.0"))
			})
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if called {
				t.Error("the update ran on a lock that did not parse")
			}
			if data, _ := os.ReadFile(path); string(data) != tc.text {
				t.Errorf("the file changed:\n%s", data)
			}
		})
	}
}

// TestUpdateLockGoroutines: two goroutines pinning into one lock at once lose no pin.
func TestUpdateLockGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFile)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, scope := range []string{"a", "b"} {
		wg.Go(func() {
			for i := range n {
				p := testPin(Name(fmt.Sprintf("%s/p%d", scope, i)), "1.0.0")
				errs <- UpdateLock(context.Background(), path, func(l *Lock) error { return l.Add(p) })
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pins) != 2*n {
		t.Errorf("%d pins, want %d: pins were lost", len(l.Pins), 2*n)
	}
}

// TestUpdateLockProcesses: two processes pinning into one lock at once lose no pin.
func TestUpdateLockProcesses(t *testing.T) {
	dir := t.TempDir()
	path, start := filepath.Join(dir, LockFile), filepath.Join(dir, "go")
	const n = 30
	var cmds []*exec.Cmd
	for _, scope := range []string{"a", "b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ARTIFACT_TEST_HELPER=pin", "ARTIFACT_TEST_LOCK="+path, "ARTIFACT_TEST_SCOPE="+scope,
			fmt.Sprintf("ARTIFACT_TEST_COUNT=%d", n), "ARTIFACT_TEST_GO="+start)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	os.WriteFile(start, nil, 0o644)
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	l, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Pins) != 2*n {
		t.Errorf("%d pins, want %d: pins were lost", len(l.Pins), 2*n)
	}
}

// TestUpdateLockCrash kills a process that rewrites a large lock in a loop, at a random moment, several
// times: the lock is always whole, the old file or the new one.
func TestUpdateLockCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFile)
	versions := map[string]bool{}
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ARTIFACT_TEST_HELPER=rewrite", "ARTIFACT_TEST_LOCK="+path)
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q, %v", line, err)
		}
		// Not an assertion: a moment at random, so the kill lands anywhere in the loop (one pass reads,
		// parses, marshals and writes 34 KB: tens of milliseconds).
		time.Sleep(time.Duration(rand.IntN(250_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		l, err := ReadLock(path)
		if err != nil {
			t.Fatalf("round %d: the lock is torn: %v", round, err)
		}
		whole := false
		for which := range 2 {
			if cmp.Equal(crashLock(which).Pins, l.Pins) {
				whole = true
				versions[l.Pins[0].Version] = true
			}
		}
		if !whole {
			t.Fatalf("round %d: the lock is neither the old nor the new one (%d pins)", round, len(l.Pins))
		}
	}
	// A temporary file a killed writer left is removed by the next update.
	if err := UpdateLock(context.Background(), path, func(*Lock) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".murmur.lock.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left after an update: %v", left)
	}
	t.Logf("versions seen after kills: %v", versions)
}

// TestReadDuringWrites: a reader that takes no lock (mur list, staging) never sees a partial file while
// another goroutine rewrites the lock.
func TestReadDuringWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFile)
	if err := WriteLock(path, crashLock(0)); err != nil {
		t.Fatal(err)
	}
	whole := map[string]bool{string(crashLock(0).Marshal()): true, string(crashLock(1).Marshal()): true}
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= 12; i++ {
			if err := UpdateLock(context.Background(), path, func(l *Lock) error { *l = *crashLock(i % 2); return nil }); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reads during 12 writes", reads)
			return
		default:
		}
		data, err := os.ReadFile(path)
		if err != nil || !whole[string(data)] {
			<-done
			t.Fatalf("a reader saw a torn lock (%d bytes, %v)", len(data), err)
		}
		reads++
	}
}

func TestUpdateLockWaitEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFile)
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- UpdateLock(context.Background(), path, func(*Lock) error { close(held); <-release; return nil })
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := UpdateLock(ctx, path, func(*Lock) error { t.Error("ran without the lock"); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
