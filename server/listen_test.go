package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-run/murmur/roster"
)

// A door moved by --listen (FormationConfig.Listen) is reached where it listens: the URL the roster
// derived from its own listen address follows it (the card, the printed URL, call-member's peers), and a
// url: the roster gives stays as it is.
func TestListenOverrideMovesTheDerivedURL(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(gatedScript), 0o644)
	for _, c := range []struct {
		entry string
		want  func(addr string) string
	}{
		{"", func(addr string) string { return "http://" + addr }},
		{"    url: http://solo.example:7001\n", func(string) string { return "http://solo.example:7001" }},
	} {
		os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: l\nmembers:\n  - name: solo\n    capsule: ./solo\n"+c.entry), 0o644)
		r, err := roster.Load(filepath.Join(root, "roster.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
			Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken}, Version: "test", Listen: addr})
		if err != nil {
			t.Fatal(err)
		}
		got := f.Members[0].URL
		f.Shutdown(context.Background())
		if want := c.want(addr); got != want {
			t.Errorf("roster entry %q, --listen %s: the member's URL is %s; want %s", c.entry, addr, got, want)
		}
	}
}
