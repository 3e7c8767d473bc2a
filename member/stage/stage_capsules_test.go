package stage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/murmur-run/murmur/roster"
)

// FormationCapsules returns each capsule it loaded once, by the roster's directory, for the members it
// staged; members that run one directory share its parse, and a capsule that does not load is absent,
// its errors reported for every member that runs it.
func TestFormationCapsulesLoadsEachDirectoryOnce(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"worker/murmur.yaml": "name: worker\ninstructions: answer\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n",
		"broken/murmur.yaml": "name: broken\nnot_a_key: 1\n",
		"roster.yaml": "formation: f\nmembers:\n" +
			"  - {name: w1, capsule: ./worker}\n  - {name: w2, capsule: ./worker}\n" +
			"  - {name: b1, capsule: ./broken}\n  - {name: b2, capsule: ./broken}\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	findings, loaded := FormationCapsules(r, nil, getenv)
	worker, broken := r.Members[0].Capsule, r.Members[2].Capsule
	if len(loaded) != 1 || loaded[worker] == nil || loaded[worker].Dir != worker {
		t.Fatalf("loaded %v, want the worker's capsule alone, by %s", loaded, worker)
	}
	invalid := map[string]int{}
	for _, f := range findings {
		if f.Code == CodeCapsuleInvalid {
			invalid[f.Member]++
		}
	}
	if invalid["b1"] == 0 || invalid["b1"] != invalid["b2"] || len(invalid) != 2 {
		t.Errorf("%s findings by member %v, want the same for b1 and b2 alone (%s does not load)", CodeCapsuleInvalid, invalid, broken)
	}
	// The members are staged side by side; their findings come in the roster's order.
	var order []string
	for _, f := range findings {
		if len(order) == 0 || order[len(order)-1] != f.Member {
			order = append(order, f.Member)
		}
	}
	if want := []string{"b1", "b2"}; !slices.Equal(order, want) {
		t.Errorf("findings by member in the order %v, want %v", order, want)
	}
	if got := Formation(r, nil, getenv); len(got) != len(findings) {
		t.Errorf("Formation found %d, FormationCapsules %d", len(got), len(findings))
	}
	if _, loaded := FormationCapsules(r, []string{"b1"}, getenv); len(loaded) != 0 {
		t.Errorf("staging b1 alone loaded %v, want nothing", loaded)
	}
}
