package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeExpect is what each command line of the README's "A first conversation" prints, as the README
// states it, keyed by a piece of the command. A command the README adds without an entry here fails the
// test, so every line the README shows is run and checked.
var readmeExpect = []struct{ command, output string }{
	{`TOKEN=$(cat deploy/examples/hello/.murmur/operator.token)`, ""},
	{`DOOR=http://127.0.0.1:7101/a2a`, ""},
	{`"parts":[{"text":"hello"}]`, `Hello from lead`},
	{`"parts":[{"text":"ask worker: 2 + 3"}]`, `worker says: 5`},
	{`-o mur ./cmd/mur`, ""},
	{`--wait 'ask worker: 2 + 3'`, `worker says: 5`},
	{`--member worker --wait '2 + 3'`, `5`},
	{`tasks --roster deploy/examples/hello/roster.yaml --member worker`, `tsk_`},
}

// TestReadmeFirstConversation runs every command line of the README's first conversation, as a newcomer
// types them from the repository's root, in a temporary copy laid out the same way (the hello example
// under deploy/examples/hello, on free ports, and ./mur built from this source), and checks each one's
// output against what the README says it prints.
func TestReadmeFirstConversation(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## A first conversation")
	if start < 0 {
		t.Fatal(`the README has no "## A first conversation" section`)
	}
	section = section[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var commands []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		joined := strings.ReplaceAll(block[1], "\\\n", "")
		for _, line := range strings.Split(joined, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				commands = append(commands, line)
			}
		}
	}
	if len(commands) == 0 {
		t.Fatal("the README's first conversation shows no command")
	}

	root := t.TempDir()
	hello := filepath.Join(root, "deploy", "examples", "hello")
	copyDir(t, "../../deploy/examples/hello", hello)
	addrs := freeAddrs(t, 2)
	lead, worker := addrs[0], addrs[1]
	ports := strings.NewReplacer("127.0.0.1:7101", lead, "127.0.0.1:7102", worker)
	rosterPath := filepath.Join(hello, "roster.yaml")
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(ports.Replace(string(b))), 0o644)
	if out, err := exec.Command("go", "build", "-o", filepath.Join(root, "mur"), ".").CombinedOutput(); err != nil {
		t.Fatalf("building mur: %v\n%s", err, out)
	}
	env := map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root}
	_, stop := runFormation(t, rosterPath, envOf(env), time.Minute)
	defer stop()

	// One shell runs the lines in order, as a terminal would, so TOKEN and DOOR carry over; a marker
	// before each line splits the output.
	var script strings.Builder
	script.WriteString("set -e\n")
	want := make([]string, len(commands))
	for i, c := range commands {
		found := false
		for _, e := range readmeExpect {
			if strings.Contains(c, e.command) {
				want[i], found = e.output, true
				break
			}
		}
		if !found {
			t.Fatalf("the README shows %q, which this test does not know: add what it prints to readmeExpect", c)
		}
		if strings.HasPrefix(c, "go build ") {
			c = "test -x ./mur" // built above, from this source
		}
		fmt.Fprintf(&script, "echo '@@%d'\n%s\necho\n", i, ports.Replace(c))
	}
	sh := exec.Command("bash", "-c", script.String())
	sh.Dir = root
	sh.Env = append(os.Environ(), "MUR_RECORDS_DIR="+env["MUR_RECORDS_DIR"], "HOME="+root)
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands failed: %v\n%s", err, out)
	}
	for i, c := range commands {
		part := string(out)
		if j := strings.Index(part, fmt.Sprintf("@@%d\n", i)); j >= 0 {
			part = part[j:]
		}
		if j := strings.Index(part, fmt.Sprintf("@@%d\n", i+1)); j >= 0 {
			part = part[:j]
		}
		if !strings.Contains(part, want[i]) {
			t.Errorf("README command %q printed\n%s\nwhere the README says %q", c, part, want[i])
		}
	}
}
