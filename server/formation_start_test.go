package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/roster"
)

// Members that run the same capsule directory share one parse of it; a member with a capsule of its own
// has its own.
func TestFormationLoadsACapsuleOnce(t *testing.T) {
	root := writeSharedFormation(t)
	f := startSharedFormation(t, root, nil)
	w1, w2, lead := f.Members[0].Session.Capsule(), f.Members[1].Session.Capsule(), f.Members[2].Session.Capsule()
	if w1 != w2 {
		t.Error("w1 and w2 run the same capsule directory but hold two parses of it")
	}
	if lead == w1 {
		t.Error("lead's capsule of its own is w1's")
	}
}

// The capsules the formation is given (mur run's staging loaded them) are what its members run: none
// is read and parsed again, and the capsules it is not given are loaded at the start.
func TestFormationStartsOnTheCapsulesGiven(t *testing.T) {
	root := writeSharedFormation(t)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := capsule.Load(r.Members[0].Capsule)
	if err != nil {
		t.Fatal(err)
	}
	f := startSharedFormation(t, root, map[string]*capsule.Capsule{r.Members[0].Capsule: worker})
	if w1, w2 := f.Members[0].Session.Capsule(), f.Members[1].Session.Capsule(); w1 != worker || w2 != worker {
		t.Errorf("w1 and w2 run %p and %p, not the capsule the formation was given (%p): it was parsed again", w1, w2, worker)
	}
	if lead := f.Members[2].Session.Capsule(); lead == nil || lead == worker || lead.Dir != r.Members[2].Capsule {
		t.Errorf("lead runs %+v, want its own capsule, loaded at the start", lead)
	}
}

// writeSharedFormation writes a formation of three members, two of them (w1 and w2) on one capsule
// directory, and returns its directory.
func writeSharedFormation(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{
		"worker/murmur.yaml": echoAgent,
		"lead/murmur.yaml":   echoAgent,
		"roster.yaml": "formation: f\nmembers:\n" +
			"  - {name: w1, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
			"  - {name: w2, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
			"  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// startSharedFormation starts the formation writeSharedFormation wrote in root, given capsules.
func startSharedFormation(t *testing.T, root string, capsules map[string]*capsule.Capsule) *Formation {
	t.Helper()
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, Capsules: capsules, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Shutdown(context.Background()) })
	return f
}
