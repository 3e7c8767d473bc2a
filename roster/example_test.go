package roster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/murmur-run/murmur/roster"
)

// formation writes a roster.yaml and a capsule directory (with its murmur.yaml) for each name into a new
// temporary directory, and returns the roster's path. Parse checks that each capsule exists.
func formation(rosterYAML string, names ...string) (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "formation")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			panic(err)
		}
		capsule := "name: " + n + "\nscript: {command: [cat]}\n"
		if err := os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte(capsule), 0o644); err != nil {
			panic(err)
		}
	}
	path = filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(path, []byte(rosterYAML), 0o644); err != nil {
		panic(err)
	}
	return path, func() { os.RemoveAll(dir) }
}

const threeMembers = `formation: review
entry: lead
members:
  - name: lead
    capsule: ./lead
  - name: writer
    capsule: ./writer
    listen: 127.0.0.1:7200
  - name: critic
    capsule: ./critic
reach:
  - from: lead
    to: [writer, critic]
  - from: writer
    to: [critic]
`

// Load reads a roster.yaml and fills in its defaults: each member's door listens on 127.0.0.1 with a
// port from 7101 up (skipping the ports members name) and is reached at the matching URL.
func ExampleLoad() {
	path, cleanup := formation(threeMembers, "lead", "writer", "critic")
	defer cleanup()

	r, err := roster.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("formation", r.Formation, "enters at", r.Entry)
	for _, m := range r.Members {
		fmt.Printf("%-6s listens on %s, reached at %s, capsule %s\n", m.Name, m.Listen, m.URL, filepath.Base(m.Capsule))
	}
	// Output:
	// formation review enters at lead
	// lead   listens on 127.0.0.1:7101, reached at http://127.0.0.1:7101, capsule lead
	// writer listens on 127.0.0.1:7200, reached at http://127.0.0.1:7200, capsule writer
	// critic listens on 127.0.0.1:7102, reached at http://127.0.0.1:7102, capsule critic
}

// Who may call whom is the reach: rules; a member no rule names as from may call nobody, and nobody
// calls itself.
func ExampleRoster_MayCall() {
	path, cleanup := formation(threeMembers, "lead", "writer", "critic")
	defer cleanup()
	r, err := roster.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}

	fmt.Println("lead → critic:", r.MayCall("lead", "critic"))
	fmt.Println("critic → lead:", r.MayCall("critic", "lead"))
	fmt.Println("lead → lead:", r.MayCall("lead", "lead"))
	// Output:
	// lead → critic: true
	// critic → lead: false
	// lead → lead: false
}

// Reachable answers in roster order, whatever the order of the rules.
func ExampleRoster_Reachable() {
	path, cleanup := formation(threeMembers, "lead", "writer", "critic")
	defer cleanup()
	r, err := roster.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, name := range r.Names() {
		fmt.Println(name, "may call", r.Reachable(name))
	}
	// Output:
	// lead may call [writer critic]
	// writer may call [critic]
	// critic may call []
}

// In a container formation members reach each other by service name (MUR_DOOR_URLS); WithURLs returns
// the roster they see there, leaving the original as it was.
func ExampleRoster_WithURLs() {
	path, cleanup := formation(threeMembers, "lead", "writer", "critic")
	defer cleanup()
	r, err := roster.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}

	inCluster, err := r.WithURLs(map[string]string{"writer": "http://writer:7101/"})
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ := inCluster.Member("writer")
	before, _ := r.Member("writer")
	fmt.Println(w.URL, "instead of", before.URL)

	_, err = r.WithURLs(map[string]string{"editor": "http://editor:7101"})
	fmt.Println(err != nil)
	// Output:
	// http://writer:7101 instead of http://127.0.0.1:7200
	// true
}

// Parse reports every problem of the file at once, each as FILE:LINE: what is wrong; what to write
// instead. Each is a *roster.Error, to be reached with errors.As and never matched by its text.
func ExampleParse_errors() {
	const broken = `formation: review
members:
  - name: lead
    capsul: ./lead
reach:
  - from: lead
    to: [wirter]
`
	_, err := roster.Parse("roster.yaml", []byte(broken))
	fmt.Println(err)

	var first *roster.Error
	if errors.As(err, &first) {
		fmt.Println("first problem on line", first.Line)
	}
	// Output:
	// roster.yaml:3: member lead has no capsule; add the capsule directory, relative to the roster's directory, such as capsule: ./lead
	// roster.yaml:4: unknown key "capsul" in member lead; did you mean "capsule"? known keys: name, capsule, listen, url, store, store_password, replicas
	// roster.yaml:7: to "wirter" of the reach rule from lead is no member; the members are lead
	// first problem on line 3
}

// EgressAllowed is the check a capsule's capabilities.network.allow list puts on the doors it may reach.
func ExampleEgressAllowed() {
	allow := []string{"localhost", "writer:7101"}
	for _, url := range []string{
		"http://127.0.0.1:7101",
		"http://[::1]:7200",
		"http://writer:7101",
		"http://writer:8080",
		"https://example.com",
	} {
		fmt.Println(url, roster.EgressAllowed(url, allow))
	}
	// Output:
	// http://127.0.0.1:7101 true
	// http://[::1]:7200 true
	// http://writer:7101 true
	// http://writer:8080 false
	// https://example.com false
}
