package artifact

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func TestStores(t *testing.T) {
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		home   string
		want   []Store
	}{
		{"home", env(), "/home/u", []Store{{ProjectStore, "/p/.murmur/store"}, {GlobalStore, "/home/u/.murmur/store"}}},
		{"MUR_STORE_DIR wins", env("MUR_STORE_DIR", "/srv/store"), "/home/u", []Store{{ProjectStore, "/p/.murmur/store"}, {GlobalStore, "/srv/store"}}},
		{"no home", env(), "", []Store{{ProjectStore, "/p/.murmur/store"}}},
		{"global is the project store", env("MUR_STORE_DIR", "/p/.murmur/store/"), "/home/u", []Store{{ProjectStore, "/p/.murmur/store"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Stores("/p", tc.getenv, tc.home)); diff != "" {
				t.Errorf("Stores (-want +got):\n%s", diff)
			}
		})
	}
}

// twoStores returns a project store and a global store in a temporary directory.
func twoStores(t *testing.T) []Store {
	dir := t.TempDir()
	return Stores(filepath.Join(dir, "proj"), env(), filepath.Join(dir, "home"))
}

func TestResolveLookupOrder(t *testing.T) {
	stores := twoStores(t)
	project, global := stores[0].Dir, stores[1].Dir
	putTool(t, project, "local/echo", "1.0.0", 1)
	putTool(t, global, "local/echo", "1.0.0", 1) // same version, other bytes: the project store's is taken
	putTool(t, global, "local/echo", "1.1.0", 1)
	putTool(t, global, "local/only", "2.0.0", 1)

	for _, tc := range []struct {
		ref         string
		wantVersion string
		wantPlace   Place
	}{
		{"local/echo@1.0.0", "1.0.0", ProjectStore},
		{"local/echo", "1.1.0", GlobalStore}, // the newest held anywhere
		{"local/echo@1.1.0", "1.1.0", GlobalStore},
		{"local/only", "2.0.0", GlobalStore},
	} {
		ref, _ := ParseRef(tc.ref)
		a, notes, err := Resolve(stores, ref)
		if err != nil || len(notes) > 0 {
			t.Fatalf("Resolve(%s): %v %v", tc.ref, err, notes)
		}
		if a.Manifest.Version != tc.wantVersion || a.Place != tc.wantPlace {
			t.Errorf("Resolve(%s) = %s from the %s, want %s from the %s", tc.ref, a.Manifest.Version, a.Place, tc.wantVersion, tc.wantPlace)
		}
		if want := filepath.Join(map[Place]string{ProjectStore: project, GlobalStore: global}[tc.wantPlace], "local", ref.Name.Tool(), tc.wantVersion); a.Dir != want {
			t.Errorf("dir = %s, want %s", a.Dir, want)
		}
	}
}

// TestResolveNewestFitting has a WIT level 3 version newer than the ones that fit.
func TestResolveNewestFitting(t *testing.T) {
	stores := twoStores(t)
	project, global := stores[0].Dir, stores[1].Dir
	putTool(t, global, "local/echo", "1.0.0", 1)
	putTool(t, project, "local/echo", "1.2.0", 1)
	putTool(t, global, "local/echo", "2.0.0", 3)
	putTool(t, global, "local/echo", "2.1.0-rc.1", 1)

	a, _, err := Resolve(stores, Ref{Name: "local/echo"})
	if err != nil || a.Manifest.Version != "1.2.0" {
		t.Fatalf("newest fitting = %v, %v; want 1.2.0 (2.0.0 needs level 3; a prerelease only when no release fits)", a, err)
	}

	_, _, err = Resolve(stores, Ref{"local/echo", "2.0.0"})
	var r *Refusal
	want := "does-not-fit: E-WIT-LEVEL-001: local/echo@2.0.0 needs WIT level 3, and this mur serves level 2; the newest version that fits is 1.2.0: pull local/echo@1.2.0"
	if !errors.As(err, &r) || err.Error() != want || r.NewestFitting != "1.2.0" || !errors.Is(err, ErrDoesNotFit) {
		t.Errorf("err = %v, want %s", err, want)
	}

	// Only the prerelease fits once the releases that fit are gone.
	os.RemoveAll(filepath.Join(global, "local", "echo", "1.0.0"))
	os.RemoveAll(filepath.Join(project, "local", "echo", "1.2.0"))
	a, _, err = Resolve(stores, Ref{Name: "local/echo"})
	if err != nil || a.Manifest.Version != "2.1.0-rc.1" {
		t.Fatalf("newest fitting = %v, %v; want 2.1.0-rc.1", a, err)
	}
	os.RemoveAll(filepath.Join(global, "local", "echo", "2.1.0-rc.1"))
	_, _, err = Resolve(stores, Ref{Name: "local/echo"})
	want = "does-not-fit: E-WIT-LEVEL-001: no version of local/echo fits this mur, which serves WIT level 2; the newest, 2.0.0, needs level 3"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, _, err = Resolve(stores, Ref{"local/echo", "2.0.0"})
	want = "does-not-fit: E-WIT-LEVEL-001: local/echo@2.0.0 needs WIT level 3, and this mur serves level 2; no version of local/echo that this capsule may pull fits"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestResolveRefusals(t *testing.T) {
	stores := twoStores(t)
	project, global := stores[0].Dir, stores[1].Dir
	putTool(t, global, "local/echo", "1.0.0", 1)
	putTool(t, global, "local/echo", "1.1.0-rc.1", 1)
	bad := putTool(t, project, "local/bad", "1.0.0", 1)
	writeFiles(t, bad, map[string]string{"murmur.yaml": "name: local/bad\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\nwit: 1\n"})
	hollow := putTool(t, project, "local/hollow", "1.0.0", 1)
	os.Remove(filepath.Join(hollow, "tool.wasm"))

	for _, tc := range []struct {
		ref  string
		want string
		is   error
	}{
		{"local/nope", "not-found: local/nope is in none of the places this capsule may pull from (the project store, the global store)", ErrNotFound},
		{"local/echo@9.0.0", "not-found: local/echo@9.0.0 is in none of the places this capsule may pull from (the project store, the global store); the versions they hold: 1.0.0, 1.1.0-rc.1", ErrNotFound},
		{"local/bad@1.0.0", "not-found: the copy of local/bad@1.0.0 in the project store cannot be used:\n" + filepath.Join(bad, "murmur.yaml") +
			`:6: unknown key "wit" at the top level; known keys: name, version, runtime, implementation, module, text, command, capsule, description, wit_level, input_schema, events`, ErrNotFound},
		{"local/bad", "not-found: the copy of local/bad@1.0.0 in the project store cannot be used:\n" + filepath.Join(bad, "murmur.yaml") +
			`:6: unknown key "wit" at the top level; known keys: name, version, runtime, implementation, module, text, command, capsule, description, wit_level, input_schema, events`, ErrNotFound},
		{"local/hollow", "not-granted: local/hollow@1.0.0 in the project store is not what its murmur.yaml says it is:\n" + filepath.Join(hollow, "murmur.yaml") +
			":5: module tool.wasm is not in the artifact directory; put the file there, or name the file that is (module: tool.wasm)", ErrNotGranted},
	} {
		ref, _ := ParseRef(tc.ref)
		_, _, err := Resolve(stores, ref)
		if err == nil || err.Error() != tc.want || !errors.Is(err, tc.is) {
			t.Errorf("Resolve(%s) = %v\nwant %s", tc.ref, err, tc.want)
		}
	}

	// A store that cannot be read is a note; the look-up goes on without it.
	os.RemoveAll(filepath.Join(project, "local"))
	writeFiles(t, project, map[string]string{"local": "not a directory"})
	a, notes, err := Resolve(stores, Ref{Name: "local/echo"})
	if err != nil || a.Place != GlobalStore {
		t.Fatalf("Resolve = %v, %v", a, err)
	}
	want := []string{"the project store (" + project + ") could not be read: not a directory"}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

func TestCatalog(t *testing.T) {
	stores := twoStores(t)
	project, global := stores[0].Dir, stores[1].Dir
	putTool(t, global, "local/echo", "1.0.0", 1)
	putTool(t, project, "local/echo", "1.2.0", 1)
	putTool(t, global, "local/echo", "2.0.0", 3)
	putTool(t, global, "local/new", "1.0.0", 3)
	putTool(t, global, "acme/fmt", "1.0.0", 1)
	writeFiles(t, filepath.Join(project, "local", "style", "0.1.0"), map[string]string{
		"murmur.yaml": "name: local/style\nversion: 0.1.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\ndescription: house style\n",
		"SKILL.md":    "Be brief.",
	})
	os.MkdirAll(filepath.Join(project, "local", "Bad"), 0o755) // not a name: not listed

	p, _ := ParsePattern("local/*")
	got, notes := Catalog(stores, p)
	want := []Entry{
		{Name: "local/echo", Runtime: RuntimeTool, Description: "a test tool", Versions: []string{"2.0.0", "1.2.0", "1.0.0"}, NewestFitting: "1.2.0", HeldIn: []Place{ProjectStore, GlobalStore}},
		{Name: "local/new", Runtime: RuntimeTool, Description: "a test tool", Versions: []string{"1.0.0"}, HeldIn: []Place{GlobalStore}},
		{Name: "local/style", Runtime: RuntimeSkill, Description: "house style", Versions: []string{"0.1.0"}, NewestFitting: "0.1.0", HeldIn: []Place{ProjectStore}},
	}
	if diff := cmp.Diff(want, got); diff != "" || len(notes) > 0 {
		t.Errorf("Catalog (-want +got):\n%s\nnotes %v", diff, notes)
	}
	writeFiles(t, filepath.Join(global, "local", "echo", "2.0.0"), map[string]string{"murmur.yaml": "name: [\n"})
	_, notes = Catalog(stores, p)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "local/echo@2.0.0 in the global store cannot be read: ") {
		t.Errorf("notes = %q", notes)
	}
}
