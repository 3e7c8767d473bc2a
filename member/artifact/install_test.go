package artifact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/runtimetools"
)

// installEnv is one session's installer over a project store and a global store, with its capsule's
// murmur.lock and runtime directory.
type installEnv struct {
	project, global string
	lock            string
	run             string
	allow           *Allowlist
	in              *Installer
}

func newInstallEnv(t *testing.T, grant *Grant, declared ...Name) *installEnv {
	t.Helper()
	root := t.TempDir()
	e := &installEnv{project: filepath.Join(root, "project", ".murmur", "store"), global: filepath.Join(root, "global"),
		lock: filepath.Join(root, "project", "cap", LockFile), run: filepath.Join(root, "run"), allow: &Allowlist{}}
	os.MkdirAll(filepath.Dir(e.lock), 0o755)
	e.in = NewInstaller(InstallConfig{Grant: grant, LockPath: e.lock, Allowlist: e.allow, Declared: declared,
		ToolsDir: filepath.Join(e.run, "tools"), SkillsDir: filepath.Join(e.run, "skills"),
		Finder: &Finder{Stores: []Store{{ProjectStore, e.project}, {GlobalStore, e.global}}}})
	return e
}

func mustGrant(t *testing.T, tool, skill, from []string) *Grant {
	t.Helper()
	g, err := NewGrant(tool, skill, from)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func putSkill(t *testing.T, store, name, version, text string) {
	t.Helper()
	n := Name(name)
	writeFiles(t, filepath.Join(store, n.Scope(), n.Tool(), version), map[string]string{
		"murmur.yaml": fmt.Sprintf("name: %s\nversion: %s\nruntime: skill\nimplementation: text\ntext: SKILL.md\ndescription: a test skill\n", name, version),
		"SKILL.md":    text})
}

func putHook(t *testing.T, store, name, version string) {
	t.Helper()
	n := Name(name)
	writeFiles(t, filepath.Join(store, n.Scope(), n.Tool(), version), map[string]string{
		"murmur.yaml": fmt.Sprintf("name: %s\nversion: %s\nruntime: hook\nimplementation: command\ncommand: [./policy.sh]\nevents: [on-tool-call]\n", name, version),
		"policy.sh":   "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n"})
}

func TestPullTool(t *testing.T) {
	e := newInstallEnv(t, mustGrant(t, []string{"local/*"}, nil, nil))
	putTool(t, e.global, "local/echo", "1.0.0", 1)
	putTool(t, e.project, "local/echo", "1.1.0", 1)
	putTool(t, e.global, "local/echo", "2.0.0", 3) // needs a WIT level this mur does not serve
	got, err := e.in.Pull(context.Background(), "local/echo")
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := Digest(filepath.Join(e.project, "local", "echo", "1.1.0"))
	want := runtimetools.Pulled{Artifact: "local/echo", Version: "1.1.0", Runtime: "tool", ToolName: "echo",
		FetchedFrom: "project store", Digest: digest}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pulled (-want +got):\n%s", diff)
	}
	lock, err := ReadLock(e.lock)
	if err != nil {
		t.Fatal(err)
	}
	wantPins := []Pin{{Name: "local/echo", Version: "1.1.0", Digest: digest, Origin: OriginAgent, Source: ProjectStore}}
	if diff := cmp.Diff(wantPins, lock.Pins); diff != "" {
		t.Errorf("pins (-want +got):\n%s", diff)
	}
	if d, err := Digest(filepath.Join(e.run, "tools", "echo")); err != nil || d != digest {
		t.Errorf("tools/echo digests to %s (%v), want %s", d, err, digest)
	}
	if !e.allow.Contains("echo") {
		t.Errorf("echo is not on the allowlist: %v", e.allow.Names())
	}
	if a, ok := e.in.Tool("echo"); !ok || a.Dir != filepath.Join(e.run, "tools", "echo") {
		t.Errorf("Tool(echo) = %+v, %v", a, ok)
	}
	added, removed := e.in.Changes()
	if diff := cmp.Diff([]string{"echo"}, added); diff != "" || len(removed) != 0 {
		t.Errorf("changes: added %v removed %v", added, removed)
	}
	if a, r := e.in.Changes(); len(a)+len(r) != 0 {
		t.Errorf("Changes again = %v %v, want nothing", a, r)
	}

	// Without a version, the pin decides: 1.1.0 again, even once a newer fitting version is held.
	putTool(t, e.global, "local/echo", "1.2.0", 1)
	again, err := e.in.Pull(context.Background(), "local/echo")
	if err != nil || again.Version != "1.1.0" {
		t.Errorf("pull again = %+v, %v; want the pinned 1.1.0", again, err)
	}
	// A global-store pull says where it came from.
	putTool(t, e.global, "local/fmt", "1.0.0", 1)
	if got, err := e.in.Pull(context.Background(), "local/fmt@1.0.0"); err != nil || got.FetchedFrom != "global store" {
		t.Errorf("pull local/fmt = %+v, %v", got, err)
	}
}

func TestPullSkill(t *testing.T) {
	e := newInstallEnv(t, mustGrant(t, nil, []string{"local/style"}, nil))
	putSkill(t, e.project, "local/style", "1.0.0", "Write short sentences.\n")
	got, err := e.in.Pull(context.Background(), "local/style@1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if got.Runtime != "skill" || got.ToolName != "style" {
		t.Errorf("pulled %+v", got)
	}
	skills := e.in.Skills()
	if len(skills) != 1 || skills[0].Origin != OriginAgent || skills[0].Text != "Write short sentences.\n" {
		t.Fatalf("skills %+v", skills)
	}
	if e.allow.Contains("style") {
		t.Errorf("a skill joined the tool allowlist")
	}
	if _, ok := e.in.Tool("style"); ok {
		t.Errorf("a skill is listed as a tool")
	}
}

// TestPullRefusals checks every refusal byte for byte, and that a refusal writes nothing: no
// murmur.lock change, no copy in the runtime directory, nothing on the allowlist.
func TestPullRefusals(t *testing.T) {
	grant := mustGrant(t, []string{"local/*", "acme/edit"}, []string{"local/style"}, []string{"stores"})
	const summary = "capabilities.install.tool: local/*, acme/edit; capabilities.install.skill: local/style; capabilities.install.from: stores"
	for _, tc := range []struct {
		name  string
		grant *Grant
		setup func(t *testing.T, e *installEnv)
		value string
		is    error
		want  string // the text, with %s for the project store's path where it appears
	}{
		{name: "no install", value: "local/echo", is: ErrNotGranted,
			want: "not-granted: this capsule declares no capabilities.install, so it may pull nothing"},
		{name: "not a full name", grant: grant, value: "echo", is: ErrNotGranted,
			want: `not-granted: "echo" is not a full artifact name: it has no scope; write scope/name, such as local/echo`},
		{name: "reserved", grant: grant, value: "local/remove-artifact", is: ErrReserved,
			want: `not-granted: E-CAP-013: local/remove-artifact: its tool name "remove-artifact" is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it`},
		{name: "outside the grant", grant: grant, value: "other/echo", is: ErrNotGranted,
			want: "not-granted: other/echo is outside this capsule's grant (" + summary + ")"},
		{name: "a hook", grant: grant, value: "local/policy",
			setup: func(t *testing.T, e *installEnv) { putHook(t, e.project, "local/policy", "1.0.0") }, is: ErrNotGranted,
			want: "not-granted: local/policy is a hook; hooks and drivers are never pulled in a session: the operator declares hooks in murmur.yaml (hooks:)"},
		{name: "a skill under the tool tier", grant: grant, value: "local/notes",
			setup: func(t *testing.T, e *installEnv) { putSkill(t, e.project, "local/notes", "1.0.0", "x") }, is: ErrNotGranted,
			want: "not-granted: local/notes is a skill, and capabilities.install.skill does not name it (" + summary + ")"},
		{name: "tool name another artifact holds", grant: grant, value: "acme/edit",
			setup: func(t *testing.T, e *installEnv) {
				e.allow.Add("local/edit")
				putTool(t, e.project, "acme/edit", "1.0.0", 1)
			}, is: ErrNotGranted,
			want: "not-granted: the tool name edit is already held by local/edit, another artifact of this session; acme/edit cannot be added beside it"},
		{name: "role disagrees with payload", grant: grant, value: "local/hollow",
			setup: func(t *testing.T, e *installEnv) {
				writeFiles(t, filepath.Join(e.project, "local", "hollow", "1.0.0"), map[string]string{"murmur.yaml": toolManifest("local/hollow", "1.0.0", 1)})
			}, is: ErrNotGranted,
			want: "not-granted: local/hollow@1.0.0 in the project store is not what its murmur.yaml says it is:\n%s/local/hollow/1.0.0/murmur.yaml:5: module tool.wasm is not in the artifact directory; put the file there, or name the file that is (module: tool.wasm)"},
		{name: "not found", grant: grant, value: "local/echo@1.0.0", is: ErrNotFound,
			want: "not-found: local/echo@1.0.0 is in none of the places this capsule may pull from (the project store, the global store)"},
		{name: "not found, other versions held", grant: grant, value: "local/echo@3.0.0",
			setup: func(t *testing.T, e *installEnv) { putTool(t, e.project, "local/echo", "1.0.0", 1) }, is: ErrNotFound,
			want: "not-found: local/echo@3.0.0 is in none of the places this capsule may pull from (the project store, the global store); the versions they hold: 1.0.0"},
		{name: "does not fit", grant: grant, value: "local/echo@2.0.0",
			setup: func(t *testing.T, e *installEnv) {
				putTool(t, e.project, "local/echo", "1.0.0", 1)
				putTool(t, e.project, "local/echo", "2.0.0", 3)
			}, is: ErrDoesNotFit,
			want: "does-not-fit: E-WIT-LEVEL-001: local/echo@2.0.0 needs WIT level 3, and this mur serves level 2; the newest version that fits is 1.0.0: pull local/echo@1.0.0"},
		{name: "no version fits", grant: grant, value: "local/echo",
			setup: func(t *testing.T, e *installEnv) { putTool(t, e.project, "local/echo", "2.0.0", 3) }, is: ErrDoesNotFit,
			want: "does-not-fit: E-WIT-LEVEL-001: no version of local/echo fits this mur, which serves WIT level 2; the newest, 2.0.0, needs level 3"},
		{name: "pinned at another version", grant: grant, value: "local/echo@1.1.0",
			setup: func(t *testing.T, e *installEnv) {
				putTool(t, e.project, "local/echo", "1.1.0", 1)
				WriteLock(e.lock, &Lock{Pins: []Pin{testPin("local/echo", "1.0.0")}})
			}, is: ErrConflict,
			want: "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0, not 1.1.0; pull local/echo@1.0.0 to use the pinned version, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) and pull again"},
		{name: "pinned with another digest", grant: grant, value: "local/echo",
			setup: func(t *testing.T, e *installEnv) {
				putTool(t, e.project, "local/echo", "1.0.0", 1)
				WriteLock(e.lock, &Lock{Pins: []Pin{testPin("local/echo", "1.0.0")}})
			}, is: ErrConflict,
			want: "murmur.lock conflict for 'local/echo': murmur.lock pins version 1.0.0 with digest " + testPin("local/echo", "1.0.0").Digest +
				", but the copy in the project store has digest %d, so its files changed after it was pinned; restore the pinned files, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) to accept the new ones"},
		{name: "murmur.lock edited into invalid YAML", grant: grant, value: "local/echo",
			setup: func(t *testing.T, e *installEnv) {
				putTool(t, e.project, "local/echo", "1.0.0", 1)
				os.WriteFile(e.lock, []byte("pins: [\n"), 0o644)
			}, is: ErrNotGranted,
			want: "not-granted: nothing can be pinned while murmur.lock cannot be read; the operator must fix it first:\n%l"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newInstallEnv(t, tc.grant)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before, _ := os.ReadFile(e.lock)
			allowed := e.allow.Names()
			_, err := e.in.Pull(context.Background(), tc.value)
			if err == nil {
				t.Fatal("pulled; want a refusal")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(err, %v) = false for %v", tc.is, err)
			}
			want := tc.want
			switch {
			case strings.Contains(want, "%s"):
				want = fmt.Sprintf(want, e.project)
			case strings.Contains(want, "%d"):
				d, _ := Digest(filepath.Join(e.project, "local", "echo", "1.0.0"))
				want = strings.Replace(want, "%d", d, 1)
			case strings.Contains(want, "%l"):
				_, lerr := ReadLock(e.lock)
				want = strings.Replace(want, "%l", lerr.Error(), 1)
			}
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			after, _ := os.ReadFile(e.lock)
			if string(before) != string(after) {
				t.Errorf("murmur.lock changed:\n%s\nwas\n%s", after, before)
			}
			if left, _ := os.ReadDir(filepath.Join(e.run, "tools")); len(left) > 0 {
				t.Errorf("the runtime directory holds %v after a refusal", left)
			}
			if diff := cmp.Diff(allowed, e.allow.Names()); diff != "" {
				t.Errorf("allowlist changed (-before +after):\n%s", diff)
			}
			if a, r := e.in.Changes(); len(a)+len(r) > 0 {
				t.Errorf("a refusal reported changes %v %v", a, r)
			}
		})
	}
}

// TestPullFromSource pulls a version no store holds from the scope's GitHub source (served on loopback),
// pins it with the owner id, and refuses E-REG-010 when the source answers for another owner.
func TestPullFromSource(t *testing.T) {
	srv := newReleaseServer(t)
	srv.publish("acme/fmt", "1.0.0", tarGz(t, toolEntries("acme/fmt", "1.0.0", 1)), "")
	e := newInstallEnv(t, mustGrant(t, []string{"acme/*"}, nil, []string{"stores", "sources"}))
	e.in.cfg.Finder.Fetcher = srv.fetcher(t)
	e.in.cfg.Finder.Sources = Sources{"acme": acme}
	got, err := e.in.Pull(context.Background(), "acme/fmt@1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if got.FetchedFrom != "github:acme/artifacts" {
		t.Errorf("fetched_from %q", got.FetchedFrom)
	}
	lock, _ := ReadLock(e.lock)
	if p, _ := lock.Get("acme/fmt"); p.Owner != 4242 || p.Source != "github:acme/artifacts" || lock.Owners["acme"] != 4242 {
		t.Errorf("pin %+v, owners %v", p, lock.Owners)
	}
	// Nothing fetched is written to a store.
	for _, s := range []string{e.project, e.global} {
		if _, err := os.Stat(filepath.Join(s, "acme")); err == nil {
			t.Errorf("the fetch wrote into %s", s)
		}
	}
	// The repository changes hands: the next pull of the scope is refused, and writes nothing.
	srv.mu.Lock()
	srv.owner = 777
	srv.mu.Unlock()
	srv.publish("acme/lint", "1.0.0", tarGz(t, toolEntries("acme/lint", "1.0.0", 1)), "")
	before, _ := os.ReadFile(e.lock)
	_, err = e.in.Pull(context.Background(), "acme/lint@1.0.0")
	want := "not-fetched: E-REG-010: github:acme/artifacts answers for GitHub owner id 777, but murmur.lock records owner id 4242 for scope acme; the repository may have changed hands: check it, then point the scope at the right repository in .murmur/sources.yaml, or (trusting the new owner) change the scope's owner in murmur.lock"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNotFetched) {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if after, _ := os.ReadFile(e.lock); string(after) != string(before) {
		t.Errorf("a refused pull changed murmur.lock")
	}
	// A source that cannot be read.
	srv.mu.Lock()
	srv.owner = -1
	srv.mu.Unlock()
	_, err = e.in.Pull(context.Background(), "acme/other@1.0.0")
	if !errors.Is(err, ErrNotFetched) {
		t.Errorf("err = %v, want not-fetched", err)
	}
}

func TestListPattern(t *testing.T) {
	e := newInstallEnv(t, mustGrant(t, []string{"local/*"}, []string{"local/style"}, nil))
	for i := range 55 {
		putTool(t, e.project, fmt.Sprintf("local/t%02d", i), "1.0.0", 1)
	}
	putTool(t, e.global, "local/t00", "2.0.0", 3)
	putSkill(t, e.project, "local/style", "1.0.0", "x")
	putSkill(t, e.project, "local/other-skill", "1.0.0", "x") // not in the skill tier: not listed
	putHook(t, e.project, "local/policy", "1.0.0")            // never pullable: not listed
	l, err := e.in.List(context.Background(), "local/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Matches) != MaxListed || l.Omitted != 6 || l.Pattern != "local/*" {
		t.Fatalf("%d matches, %d omitted", len(l.Matches), l.Omitted)
	}
	first := runtimetools.ArtifactMatch{Artifact: "local/style", Runtime: "skill", Description: "a test skill",
		Versions: []string{"1.0.0"}, NewestFitting: "1.0.0", HeldIn: []string{"project store"}}
	if diff := cmp.Diff(first, l.Matches[0]); diff != "" {
		t.Errorf("first match (-want +got):\n%s", diff)
	}
	t00 := runtimetools.ArtifactMatch{Artifact: "local/t00", Runtime: "tool", Description: "a test tool",
		Versions: []string{"2.0.0", "1.0.0"}, NewestFitting: "1.0.0", HeldIn: []string{"project store", "global store"}}
	if diff := cmp.Diff(t00, l.Matches[1]); diff != "" {
		t.Errorf("local/t00 (-want +got):\n%s", diff)
	}
	for i := 1; i < len(l.Matches); i++ {
		if l.Matches[i-1].Artifact >= l.Matches[i].Artifact {
			t.Errorf("not sorted at %d: %s, %s", i, l.Matches[i-1].Artifact, l.Matches[i].Artifact)
		}
	}
	if _, err := e.in.List(context.Background(), "other/*"); err == nil || !errors.Is(err, ErrNotGranted) {
		t.Errorf("other/* = %v, want not-granted", err)
	}
}

func TestRemove(t *testing.T) {
	grant := mustGrant(t, []string{"local/*"}, nil, nil)
	e := newInstallEnv(t, grant, "local/declared")
	putTool(t, e.project, "local/echo", "1.0.0", 1)
	ctx := context.Background()
	if _, err := e.in.Pull(ctx, "local/echo"); err != nil {
		t.Fatal(err)
	}
	e.in.Changes()
	// By its tool name.
	got, err := e.in.Remove(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runtimetools.Removed{Artifact: "local/echo", Removed: true, ToolName: "echo", Runtime: "tool"}, got); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if lock, _ := ReadLock(e.lock); len(lock.Pins) != 0 {
		t.Errorf("pins left: %+v", lock.Pins)
	}
	if _, err := os.Stat(filepath.Join(e.run, "tools", "echo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tools/echo is still there: %v", err)
	}
	if e.allow.Contains("echo") {
		t.Errorf("echo is still on the allowlist")
	}
	if n, ok := e.in.Removed("echo"); !ok || n != "local/echo" {
		t.Errorf("Removed(echo) = %s, %v", n, ok)
	}
	if a, r := e.in.Changes(); len(a) != 0 || cmp.Diff([]string{"echo"}, r) != "" {
		t.Errorf("changes %v %v", a, r)
	}
	// Again: nothing installed under the name.
	got, err = e.in.Remove(ctx, "local/echo")
	if err != nil || got.Removed || got.Artifact != "local/echo" {
		t.Errorf("second removal = %+v, %v", got, err)
	}
	// Pulled again, it is callable again.
	if _, err := e.in.Pull(ctx, "local/echo"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.in.Removed("echo"); ok {
		t.Errorf("a tool pulled again is still reported removed")
	}

	WriteLock(e.lock, &Lock{Pins: []Pin{testPin("local/ops", "1.0.0")}})
	for _, tc := range []struct {
		name  string
		in    *Installer
		value string
		want  string
	}{
		{"declared", e.in, "local/declared", "not-removable: local/declared is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml"},
		{"operator's pin", e.in, "local/ops", "not-removable: local/ops is pinned by the operator (origin: operator in murmur.lock); only the operator takes it out"},
		// SPEC: "the full name or the tool name"; by tool name the refusal is the one the full name gets.
		{"declared, by tool name", e.in, "declared", "not-removable: local/declared is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml"},
		{"operator's pin, by tool name", e.in, "ops", "not-removable: local/ops is pinned by the operator (origin: operator in murmur.lock); only the operator takes it out"},
		{"no install", newInstallEnv(t, nil).in, "local/echo", "not-granted: this capsule declares no capabilities.install, so it may pull nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(e.lock)
			_, err := tc.in.Remove(ctx, tc.value)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
			if after, _ := os.ReadFile(e.lock); string(after) != string(before) {
				t.Errorf("a refused removal changed murmur.lock")
			}
		})
	}
}

// TestPullConcurrentSessions has two sessions (two installers, two runtime directories) pull into one
// capsule's murmur.lock at once: neither loses the other's pins.
func TestPullConcurrentSessions(t *testing.T) {
	grant := mustGrant(t, []string{"local/*"}, nil, nil)
	a := newInstallEnv(t, grant)
	b := newInstallEnv(t, grant)
	b.in.cfg.LockPath, b.in.cfg.Finder = a.lock, a.in.cfg.Finder // one capsule, one project store
	const n = 12
	for i := range n {
		putTool(t, a.project, fmt.Sprintf("local/t%02d", i), "1.0.0", 1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		in := a.in
		if i%2 == 1 {
			in = b.in
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := in.Pull(context.Background(), fmt.Sprintf("local/t%02d", i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lock, err := ReadLock(a.lock)
	if err != nil {
		t.Fatal(err)
	}
	if len(lock.Pins) != n {
		t.Errorf("%d pins, want %d: %+v", len(lock.Pins), n, lock.Pins)
	}
}
