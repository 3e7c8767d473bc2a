package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// verbsFormation writes a formation of two members on free ports into root: lead hands every task to
// helper with call-member; helper sleeps ("sleep N"), writes files ("files": one small, inline, one of
// 300 KiB, served by URL), answers data ("data"), or echoes.
func verbsFormation(t *testing.T, root string) {
	t.Helper()
	for rel, body := range map[string]string{
		"roster.yaml": "formation: verbs\nentry: lead\nmembers:\n" +
			"  - {name: lead, capsule: ./lead, listen: " + freeAddr(t) + "}\n" +
			"  - {name: helper, capsule: ./helper, listen: " + freeAddr(t) + "}\n" +
			"reach:\n  - {from: lead, to: [helper]}\n",
		"lead/murmur.yaml": "name: lead\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
			"capabilities:\n  network: {allow: [localhost]}\ntask_acceptance: queue\n",
		"lead/script.yaml": `rules:
  - match: ''
    turns:
      - call: [{tool: call-member, input: {member: helper, task: '{{.task}}'}}]
      - say: 'waiting for helper'
      - say: 'helper says: {{(index .answers 0).output}}'
`,
		"helper/murmur.yaml": "name: helper\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
			"capabilities:\n  shell: {allow: [sleep, mkdir, tee, dd]}\ntask_acceptance: queue\n",
		"helper/script.yaml": `rules:
  - match: '^sleep (?P<n>\d+)$'
    turns:
      - call: [{tool: sleep, input: {args: ['{{.n}}']}}]
      - say: 'slept {{.n}}s'
  - match: '^files$'
    turns:
      - call: [{tool: mkdir, input: {args: [-p, out/artifacts/sub]}}]
      - call: [{tool: tee, input: {args: [out/artifacts/sub/small.txt], stdin: "hello file\n"}}]
      - call: [{tool: dd, input: {args: [if=/dev/zero, of=out/artifacts/big.bin, bs=1024, count=300]}}]
      - say: 'wrote two files'
  - match: '^data$'
    turns:
      - data: {items: 3, total: '12.50'}
  - match: ''
    turns:
      - say: 'helper heard: {{.task}}'
`,
	} {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGetCancelFollowAndSave runs mur send --follow, mur get, mur cancel (with and without --tree) and
// --save against a running formation, each hint mur prints run as printed from where the user stands.
func TestGetCancelFollowAndSave(t *testing.T) {
	root := t.TempDir()
	verbsFormation(t, root)
	t.Chdir(root)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})
	runOut := startMur(t, []string{"run", "--roster", "roster.yaml"}, env)
	waitOutput(t, runOut, regexp.MustCompile(`(?m)^\s+helper\s+http://\S+/a2a$`), 1)
	ctx := context.Background()
	mur := func(line string) (string, string, int) { t.Helper(); return runHint(t, ctx, env, line) }

	// --follow: the progress on stderr as it happens, the answer on stdout.
	sout, serr, code := mur("mur send --roster roster.yaml --follow 'hi there'")
	if code != 0 || sout != "helper says: helper heard: hi there\n" {
		t.Fatalf("send --follow: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}
	for _, want := range []string{" task tsk_", " SUBMITTED\n", " WORKING: tool call-member: running\n", " WORKING: waiting on call-member: 1 call(s) outstanding\n",
		" artifact response: helper says: helper heard: hi there\n", " COMPLETED: helper says: helper heard: hi there\n"} {
		if !strings.Contains(serr, want) {
			t.Errorf("send --follow's progress lacks %q:\n%s", want, serr)
		}
	}
	if sout, serr, code = mur(hint(t, serr, "mur send")); code != 0 || sout != "helper says: helper heard: TEXT\n" {
		t.Errorf("the conversation's next task: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}

	// mur get finds a task at whichever member has it: here helper's, given by lead.
	sout, _, _ = mur("mur tasks --roster roster.yaml --member helper")
	helperTask := regexp.MustCompile(`(?m)^(tsk_\w+)\s+COMPLETED`).FindStringSubmatch(sout)
	if helperTask == nil {
		t.Fatalf("mur tasks:\n%s", sout)
	}
	sout, serr, code = mur("mur get --roster roster.yaml " + helperTask[1])
	if code != 0 || !regexp.MustCompile(`(?m)^member\s+helper$`).MatchString(sout) || !regexp.MustCompile(`(?m)^state\s+COMPLETED`).MatchString(sout) ||
		!strings.Contains(sout, "answer:\n  helper heard: ") || !strings.Contains(serr, "(lead gave this task to helper with call-member: its conversation is lead's)") {
		t.Errorf("mur get of helper's task: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}

	// Files: mur send --wait says the answer carries them; its hints show and save them.
	sout, serr, code = mur("mur send --roster roster.yaml --member helper --wait files")
	if code != 0 || sout != "wrote two files\n" || !strings.Contains(serr, "(the answer also carries 2 file(s): big.bin, sub/small.txt; see it all: mur get") {
		t.Fatalf("send --wait files: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}
	filesTask := regexp.MustCompile(`--save (tsk_\w+) `).FindStringSubmatch(serr)
	if filesTask == nil {
		t.Fatalf("no --save hint in %s", serr)
	}
	gets := hints(serr, "mur get")
	if len(gets) != 2 {
		t.Fatalf("want two mur get hints in %s", serr)
	}
	sout, _, code = mur(gets[0])
	if code != 0 || !regexp.MustCompile(`(?m)^  big\.bin\s+file\s+application/octet-stream, at http://\S+/tasks/`+filesTask[1]+`/artifacts/big\.bin$`).MatchString(sout) ||
		!regexp.MustCompile(`(?m)^  sub/small\.txt\s+file\s+text/plain; charset=utf-8, 11 bytes inline$`).MatchString(sout) {
		t.Errorf("%s: exit %d\n%s", gets[0], code, sout)
	}
	sout, serr, code = mur(gets[1])
	if code != 0 || !strings.Contains(sout, "saved "+filepath.Join(filesTask[1], "big.bin")+" (300.0 KiB)") {
		t.Errorf("%s: exit %d\nstdout %s\nstderr %s", gets[1], code, sout, serr)
	}
	checkSaved := func(dir string) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(dir, "sub", "small.txt")); err != nil || string(b) != "hello file\n" {
			t.Errorf("%s/sub/small.txt: %q %v", dir, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "big.bin")); err != nil || len(b) != 300<<10 || !bytes.Equal(b, make([]byte, 300<<10)) {
			t.Errorf("%s/big.bin: %d bytes, %v", dir, len(b), err)
		}
	}
	checkSaved(filesTask[1])
	// --save on mur send --wait; again on the same folder: the same bytes are left as they are; other
	// bytes are never replaced.
	if sout, serr, code = mur("mur send --roster roster.yaml --member helper --wait --save out files"); code != 0 ||
		!strings.Contains(serr, "saved "+filepath.Join("out", "sub", "small.txt")+" (11 bytes)") || strings.Contains(serr, "--save tsk_") {
		t.Errorf("send --wait --save: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}
	checkSaved("out")
	if sout, _, code = mur("mur get --roster roster.yaml --save out " + filesTask[1]); code != 0 || !strings.Contains(sout, "out/big.bin is already there, with the same 300.0 KiB") {
		t.Errorf("get --save into a folder with the same files: exit %d\n%s", code, sout)
	}
	os.WriteFile(filepath.Join("out", "big.bin"), []byte("mine"), 0o644)
	if _, serr, code = mur("mur get --roster roster.yaml --save out " + filesTask[1]); code != 1 ||
		!strings.Contains(serr, "out/big.bin already exists with other bytes, and mur replaces no file: save into another folder (--save DIR) or move it away") {
		t.Errorf("get --save over another file: exit %d\n%s", code, serr)
	}
	if b, _ := os.ReadFile(filepath.Join("out", "big.bin")); string(b) != "mine" {
		t.Errorf("out/big.bin was replaced")
	}

	// Data: the answer is the JSON, and mur send says it is data too.
	if sout, serr, code = mur("mur send --roster roster.yaml --member helper --wait data"); code != 0 || sout != "{\"items\":3,\"total\":\"12.50\"}\n" ||
		!strings.Contains(serr, "(the answer also carries data; see it all: mur get --roster roster.yaml --member helper tsk_") {
		t.Errorf("send --wait data: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}

	// A task watched with the hint mur send prints without --wait.
	sout, serr, code = mur("mur send --roster roster.yaml --member helper 'sleep 1'")
	if code != 0 || !strings.Contains(sout, "TASK_STATE_SUBMITTED") {
		t.Fatalf("send: exit %d %s %s", code, sout, serr)
	}
	if sout, serr, code = mur(hint(t, serr, "mur get")); code != 0 || sout != "slept 1s\n" || !strings.Contains(serr, " COMPLETED: slept 1s") {
		t.Errorf("get --follow: exit %d\nstdout %q\nstderr %s", code, sout, serr)
	}

	// Cancel: lead's task ends, helper's keeps running until the operator says --tree.
	sout, serr, code = mur("mur send --roster roster.yaml 'sleep 60'")
	leadTask := regexp.MustCompile(`^(tsk_\w+)\s`).FindStringSubmatch(sout)
	if code != 0 || leadTask == nil {
		t.Fatalf("send: exit %d %s %s", code, sout, serr)
	}
	var working string
	for deadline := time.Now().Add(30 * time.Second); working == ""; time.Sleep(50 * time.Millisecond) {
		sout, _, _ = mur("mur tasks --roster roster.yaml --member helper --state TASK_STATE_WORKING")
		if m := regexp.MustCompile(`(?m)^(tsk_\w+)\s+WORKING`).FindStringSubmatch(sout); m != nil {
			working = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper never worked on lead's task:\n%s", sout)
		}
	}
	_, serr, code = mur("mur get --roster roster.yaml " + leadTask[1])
	stop := hints(serr, "mur cancel")
	if code != 0 || len(stop) != 1 || len(hints(serr, "mur get")) != 1 {
		t.Fatalf("get of a working task: exit %d, hints %q in\n%s", code, stop, serr)
	}
	sout, serr, code = mur(stop[0])
	if code != 0 || !strings.Contains(sout, "task "+leadTask[1]+" at lead: CANCELED\n") ||
		!strings.Contains(sout, "keep running, since a member's task is its own:\n  helper "+working+" WORKING\n") {
		t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", stop[0], code, sout, serr)
	}
	if got, _, _ := mur("mur get --roster roster.yaml --member helper " + working); !regexp.MustCompile(`(?m)^state\s+WORKING`).MatchString(got) {
		t.Errorf("helper's task after lead's was canceled:\n%s", got)
	}
	tree := hint(t, sout, "mur cancel")
	if tree != "mur cancel --roster roster.yaml --tree "+leadTask[1] {
		t.Errorf("the --tree hint: %q", tree)
	}
	if sout, serr, code = mur(tree); code != 0 || !strings.Contains(sout, "task "+working+" at helper: CANCELED\n") ||
		!strings.Contains(sout, "canceled 1 task(s) "+leadTask[1]+" caused on other members") {
		t.Errorf("%s: exit %d\nstdout %s\nstderr %s", tree, code, sout, serr)
	}
	if got, _, _ := mur("mur get --roster roster.yaml " + working); !regexp.MustCompile(`(?m)^state\s+CANCELED`).MatchString(got) {
		t.Errorf("helper's task after --tree:\n%s", got)
	}
	// A task that already ended has nothing to cancel.
	if sout, _, code = mur("mur cancel --roster roster.yaml " + filesTask[1]); code != 1 || !strings.Contains(sout, "at helper already ended COMPLETED: nothing to cancel") {
		t.Errorf("cancel of a completed task: exit %d\n%s", code, sout)
	}

	// Unknown tasks, named with and without the member.
	for _, tc := range []struct{ line, want string }{
		{"mur get --roster roster.yaml tsk_unknown", "no member of formation verbs has task tsk_unknown (asked lead, helper): check the id (mur tasks --roster roster.yaml lists lead's tasks"},
		{"mur cancel --roster roster.yaml --member helper tsk_unknown", "helper has no task tsk_unknown: check the id (mur tasks --roster roster.yaml --member helper lists the member's tasks)"},
		{"mur get --roster roster.yaml --follow tsk_unknown", "no member of formation verbs has task tsk_unknown"},
	} {
		if _, serr, code := mur(tc.line); code != 1 || !strings.Contains(serr, tc.want) {
			t.Errorf("%s: exit %d\n%s", tc.line, code, serr)
		}
	}
}

// TestQuestionHintsRunAsPrinted answers the approvals example's questions with the commands mur send
// --wait, --follow and mur get print.
func TestQuestionHintsRunAsPrinted(t *testing.T) {
	root := filepath.Join(t.TempDir(), "approvals")
	copyDir(t, "../../deploy/examples/approvals", root)
	os.RemoveAll(filepath.Join(root, ".murmur", "members"))
	b, _ := os.ReadFile(filepath.Join(root, "roster.yaml"))
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte(strings.Replace(string(b), "127.0.0.1:7401", freeAddr(t), 1)), 0o644)
	t.Chdir(filepath.Dir(root))
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})
	runOut := startMur(t, []string{"run", "--roster", "approvals/roster.yaml"}, env)
	waitOutput(t, runOut, regexp.MustCompile(`(?m)^\s+clerk\s+http://\S+/a2a$`), 1)
	ctx := context.Background()
	mur := func(line string) (string, string, int) { t.Helper(); return runHint(t, ctx, env, line) }

	// An approval asked of mur send --wait, given with the command it prints.
	sout, serr, code := mur("mur send --roster approvals/roster.yaml --wait status")
	if code != 3 || !strings.Contains(sout, "answer: mur send --roster approvals/roster.yaml --task tsk_") {
		t.Fatalf("send --wait status: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}
	if sout, serr, code = mur(hint(t, sout, "mur send")); code != 0 || !strings.HasPrefix(sout, "ok: {") {
		t.Errorf("the approval: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}

	// A question asked of mur send --follow: the progress, the question, exit 3; mur get shows it again
	// with the same answer; the answer as printed ('YOUR ANSWER') goes in.
	sout, serr, code = mur("mur send --roster approvals/roster.yaml --follow 'convert 12 dollars'")
	if code != 3 || !strings.Contains(sout, "waits for your input: Into which currency shall I convert 12 dollars?") || !strings.Contains(serr, " INPUT_REQUIRED") {
		t.Fatalf("send --follow convert: exit %d\nstdout %s\nstderr %s", code, sout, serr)
	}
	answer := hint(t, sout, "mur send")
	id := regexp.MustCompile(`--task (tsk_\w+)`).FindStringSubmatch(answer)[1]
	gout, _, code := mur("mur get --roster approvals/roster.yaml " + id)
	if code != 0 || !regexp.MustCompile(`(?m)^state\s+INPUT_REQUIRED`).MatchString(gout) || hint(t, gout, "mur send") != answer {
		t.Errorf("mur get of a waiting task: exit %d\n%s", code, gout)
	}
	if sout, serr, code = mur(answer); code != 0 || sout != "Converting 12 dollars into YOUR ANSWER.\n" {
		t.Errorf("%s: exit %d\nstdout %q\nstderr %s", answer, code, sout, serr)
	}
}

// TestClientCommandErrors gives each client command input it cannot use: each says what was wrong and
// what to do, exit 2 for usage and 1 for a door that does not answer.
func TestClientCommandErrors(t *testing.T) {
	dir := t.TempDir()
	closed := "http://" + freeAddr(t)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	write("c/murmur.yaml", "name: c\n")
	down := write("down.yaml", "formation: down\nmembers:\n  - {name: c, capsule: ./c, listen: "+strings.TrimPrefix(closed, "http://")+"}\n")
	port0 := write("port0.yaml", "formation: zero\nmembers:\n  - {name: c, capsule: ./c, listen: 127.0.0.1:0}\n")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--help"}, 0, ""},
		{[]string{"get"}, 2, "name one task: mur get"},
		{[]string{"get", "--door", closed, "a", "b"}, 2, "name one task"},
		{[]string{"cancel"}, 2, "name one task: mur cancel"},
		{[]string{"send", "--door", closed, "--save", "d", "hi"}, 2, "--save d needs --wait or --follow"},
		{[]string{"send", "--member", "w", "hi"}, 2, "--member w needs the formation's roster: add --roster FILE"},
		{[]string{"send", "hi"}, 2, "say which door to talk to: --roster FILE"},
		{[]string{"send", "--door", closed, "--roster", down, "hi"}, 2, "give either --door URL or --roster FILE"},
		{[]string{"get", "--door", "127.0.0.1:7101", "--token", "t", "tsk_x"}, 2, `--door "127.0.0.1:7101" is not a door's URL: write it as mur run prints it, such as http://127.0.0.1:7101`},
		{[]string{"get", "--door", closed, "--token", "t", "--json", "--follow", "tsk_x"}, 2, "--json prints the task as it stands"},
		{[]string{"cancel", "--door", closed, "--token", "t", "--tree", "tsk_x"}, 2, "--tree finds the tasks tsk_x caused at the other members of its formation: name the formation with --roster FILE"},
		{[]string{"get", "--door", closed, "tsk_x"}, 2, "no operator token: set MUR_OPERATOR_TOKEN or --token"},
		{[]string{"get", "--roster", down, "tsk_x"}, 2, "no operator token in " + filepath.Join(dir, ".murmur", "operator.token") + " (no such file or directory): start the formation once with mur run --roster " + down},
		{[]string{"send", "--roster", port0, "--token", "t", "hi"}, 2, "member c of " + port0 + " listens on a port the system picks (listen: 127.0.0.1:0)"},
		{[]string{"get", "--door", closed, "--token", "t", "tsk_x"}, 1, "unreachable: Post \"" + closed + "/a2a\""},
		{[]string{"get", "--door", closed, "--token", "t", "tsk_x"}, 1, "mur: check --door " + closed + ": it is the URL mur run printed for the member, and the formation must be running"},
		{[]string{"send", "--roster", down, "--token", "t", "--follow", "hi"}, 1, "mur: is the formation running? start it with: mur run --roster " + down},
		{[]string{"cancel", "--roster", down, "--token", "t", "tsk_x"}, 1, "no door of formation down answers (c)\nmur: is the formation running?"},
		{[]string{"tasks", "--roster", down, "--token", "t"}, 1, "mur: is the formation running? start it with: mur run --roster " + down},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &out, &errb)
		if code := exitCodeFor(err, &errb); code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("mur %v: exit %d, want %d; stderr lacks %q:\n%s", tc.args, code, tc.code, tc.stderr, errb.String())
		}
		if tc.args[0] == "--help" {
			for _, want := range []string{"mur init [DIR]", "mur get [--roster FILE | --door URL] [--follow] [--save DIR] TASK", "mur cancel [--roster FILE | --door URL] [--tree] TASK", "[--wait | --follow] [--save DIR] TEXT"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("mur --help lacks %q", want)
				}
			}
		}
	}
}
