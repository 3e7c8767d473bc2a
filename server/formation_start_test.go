package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-run/murmur/roster"
)

// Members that run the same capsule directory share one parse of it; a member with a capsule of its own
// has its own.
func TestFormationLoadsACapsuleOnce(t *testing.T) {
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
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Shutdown(context.Background())
	w1, w2, lead := f.Members[0].Session.Capsule(), f.Members[1].Session.Capsule(), f.Members[2].Session.Capsule()
	if w1 != w2 {
		t.Error("w1 and w2 run the same capsule directory but hold two parses of it")
	}
	if lead == w1 {
		t.Error("lead's capsule of its own is w1's")
	}
}
