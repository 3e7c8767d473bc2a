package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/sandbox"
)

// lockedBuffer is a buffer two goroutines may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRun runs this test binary as `mur run` with env added to the environment, and waits for the
// doors of every member; its stdout and stderr are kept in logs.
func startRun(t *testing.T, rosterPath string, env []string, members int) (map[string]string, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "--roster", rosterPath)
	cmd.Env = append(append(os.Environ(), "MUR_TEST_AS_MUR=1"), env...)
	logs := &lockedBuffer{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	urls := make(chan map[string]string, 1)
	go func() {
		re := regexp.MustCompile(`^\s+(\S+)\s+(http://\S+)/a2a$`)
		got := map[string]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				got[m[1]] = m[2]
				if len(got) == members {
					urls <- got
				}
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("mur run exited before opening its doors:\n%s", logs.String())
		}
		return u, logs
	case <-time.After(60 * time.Second):
		t.Fatalf("mur run did not open its doors:\n%s", logs.String())
	}
	return nil, nil
}

// The canary formation. lead's capsule is the roster's own directory, so the data directory (.murmur/)
// is inside it, as a roster with `capsule: .` has it.
var canaryFiles = map[string]string{
	"roster.yaml": `formation: canary
entry: lead
members:
  - {name: lead, capsule: ., listen: '127.0.0.1:0'}
  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}
  - {name: runner, capsule: ./runner, listen: '127.0.0.1:0'}
  - {name: planner, capsule: ./planner, listen: '127.0.0.1:0'}
reach:
  - {from: lead, to: [worker]}
  - {from: worker, to: [runner]}
`,
	"murmur.yaml": `name: lead
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
    other: {driver: script, script: script.yaml}
capabilities:
  shell: {allow: [cat, sh]}
  network: {allow: [localhost]}
control: {agent_settings: [inference.driver]}
exports: {peer_files: out}
lifecycle: {shell_grace_secs: 8}
`,
	"script.yaml": `rules:
  - match: '^probe (?P<port>\d+)$'
    turns:
      - call:
          - {tool: cat, input: {args: ['../../../operator.token']}}
          - {tool: cat, input: {args: ['../../../formation.token']}}
          - {tool: cat, input: {args: ['../../../canary.txt']}}
          - {tool: sh, input: {args: ['-c', '{{.probe}}']}}
          - {tool: sh, input: {args: ['-c', 'echo report > out/report.txt']}}
      - call: [{tool: sh, input: {args: ['-c', 'cat ../../../operator.token; env; exec sleep 120']}}]
      - call: [{tool: background-command, input: {operation: wait, work_id: '{{(index .results 0).data.work_id}}', wait_secs: 1}}]
      - call: [{tool: session-status}]
      - call: [{tool: share-file, input: {path: report.txt}}]
      - call: [{tool: call-member, input: {member: worker, task: 'please fetch {{(index .results 0).data.handle}}'}}]
      - say: waiting
      - call: [{tool: switch-driver, input: {driver: other}}]
      - say: '{{.transcript}}'
  - match: '^give up$'
    turns:
      - call: [{tool: call-member, input: {member: worker, task: 'give up'}}]
      - say: waiting
      - say: '{{.transcript}}'
`,
	"worker/murmur.yaml": `name: worker
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
capabilities:
  shell: {allow: [cat]}
  peer_fetch: true
  network: {allow: [localhost]}
`,
	"worker/script.yaml": `rules:
  - match: '(?P<h>pf1\.[A-Za-z0-9_-]+)'
    turns:
      - call: [{tool: fetch-peer-file, input: {handle: '{{.h}}', as: inbox/report.txt}}]
      - call: [{tool: cat, input: {args: [inbox/report.txt, ../../../operator.token]}}]
      - say: '{{.transcript}}'
  - match: '^give up$'
    turns:
      - call: [{tool: end-without-answer, input: {reason: 'nothing here'}}]
      - say: should not be needed
`,
	"runner/murmur.yaml": "name: runner\nscript: {command: [sh, -c, 'read -r body; eval \"$body\"']}\n",
	// planner runs the probe through the tools that came later: a plan's step, an on-tool-call hook
	// (which answers a marked call with what it found, as its deny reason), and a delegated sub-capsule.
	"planner/murmur.yaml": `name: planner
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
capabilities:
  shell: {allow: [sh]}
  plan: {submit: true}
  spawn: {allow: [./sub]}
hooks: [local/peek]
`,
	"planner/script.yaml": `rules:
  - match: '^probe (?P<port>\d+)$'
    turns:
      - call: [{tool: submit-plan, input: {on_error: continue, steps: [{id: p1, tool: sh, input: {args: ['-c', '{{.probe}}']}}]}}]
      - call: [{tool: sh, input: {args: ['-c', 'echo hook-probe {{.port}}']}}]
      - call: [{tool: delegate-task, input: {capsule: sub, task: '{{.probe}}'}}]
      - say: waiting
      - say: '{{.transcript}}'
`,
	"planner/sub/murmur.yaml":                    "name: sub\nscript: {command: [sh, -c, 'read -r body; eval \"$body\"']}\n",
	".murmur/store/local/peek/1.0.0/murmur.yaml": "name: local/peek\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: [on-tool-call]\n",
}

// probe is a shell script that tries each secret and prints one line per try.
func probe(dataDir, recordsDir, home string, port string) string {
	var b strings.Builder
	b.WriteString(`try() { if out=$(cat "$2" 2>/dev/null); then echo "$1: read $out"; else echo "$1: refused"; fi; }; `)
	for _, tr := range [][2]string{
		{"operator-token", filepath.Join(dataDir, "operator.token")},
		{"formation-token", filepath.Join(dataDir, "formation.token")},
		{"canary", filepath.Join(dataDir, "canary.txt")},
		{"task-store", filepath.Join(dataDir, "members", "lead", "tasks.db")},
		{"home", filepath.Join(home, "planted")},
		{"mur-environ", "/proc/$PPID/environ"},
	} {
		fmt.Fprintf(&b, "try %s %s; ", tr[0], tr[1])
	}
	fmt.Fprintf(&b, `if ls %s >/dev/null 2>&1; then echo "records: listed"; else echo "records: refused"; fi; `, recordsDir)
	fmt.Fprintf(&b, `if bash -c "exec 3<>/dev/tcp/127.0.0.1/%s" 2>/dev/null; then echo "door: connected"; else echo "door: refused"; fi; `, port)
	b.WriteString(`env | grep -c TOKEN | sed "s/^/token-vars: /"`)
	return b.String()
}

// TestCanaryTokenReachesNothing runs a formation whose tokens and data directory hold canaries, and
// every kind of tool the runtime has; no canary appears in any tool result, answer, transcript,
// record, stored task or log line, and each command's tries at the secrets are refused.
func TestCanaryTokenReachesNothing(t *testing.T) {
	if !sandbox.LandlockAvailable() {
		t.Skip("this kernel does not enforce Landlock (W-SHELL-005)")
	}
	if _, err := os.Stat("/usr/bin/bash"); err != nil {
		t.Skip("no bash to try a TCP connect with")
	}
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	dataDir := filepath.Join(proj, ".murmur")
	home := filepath.Join(root, "home")
	records := filepath.Join(root, "records")
	// lead's probe is in its script, the door's port taken from the task's text; the runner's is the
	// task's text itself.
	leadProbe := strings.ReplaceAll(probe(dataDir, records, home, "{{.port}}"), "'", "''")
	for name, body := range canaryFiles {
		body = strings.ReplaceAll(body, "{{.probe}}", leadProbe)
		p := filepath.Join(proj, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The hook takes the door's port from the call it is asked about.
	hook := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *hook-probe*) ;; *) echo '{\"decision\":\"allow\"}'; exit 0;; esac\n" +
		"port=$(printf '%s' \"$in\" | grep -o 'hook-probe [0-9]*' | cut -d' ' -f2)\n" +
		"found=$(" + probe(dataDir, records, home, "$port") + ")\n" +
		"printf '{\"decision\":\"deny\",\"reason\":\"hook found: %s\"}' \"$(printf '%s' \"$found\" | tr '\\n' ';')\"\n"
	if err := os.WriteFile(filepath.Join(proj, ".murmur/store/local/peek/1.0.0/hook.sh"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	canaries := map[string]string{
		"operator token": "mur_canaryop0123456789abcdef", "formation token": "mur_canaryfm0123456789abcdef",
		"data file": "canary-in-the-data-dir-7f3e", "home file": "canary-in-home-91bd",
	}
	os.MkdirAll(dataDir, 0o700)
	os.WriteFile(filepath.Join(dataDir, "operator.token"), []byte(canaries["operator token"]+"\n"), 0o600)
	os.WriteFile(filepath.Join(dataDir, "formation.token"), []byte(canaries["formation token"]+"\n"), 0o600)
	os.WriteFile(filepath.Join(dataDir, "canary.txt"), []byte(canaries["data file"]), 0o600)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "planted"), []byte(canaries["home file"]), 0o600)
	urls, logs := startRun(t, filepath.Join(proj, "roster.yaml"), []string{
		"HOME=" + home, "MUR_RECORDS_DIR=" + records,
		"MUR_OPERATOR_TOKEN=" + canaries["operator token"], "MUR_FORMATION_TOKEN=" + canaries["formation token"],
	}, 4)
	port := urls["lead"][strings.LastIndexByte(urls["lead"], ':')+1:]
	ctx := context.Background()
	client := func(m string) *a2a.Client { return a2a.NewClient(urls[m]+"/a2a", canaries["operator token"], nil) }
	ask := func(m, text string) *a2a.Task {
		t.Helper()
		res, err := client(m).SendMessage(ctx, &a2a.SendMessageRequest{
			Message: &a2a.Message{MessageID: a2a.MessageID("m-" + m + text[:4]), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}})
		if err != nil {
			t.Fatalf("SendMessage to %s: %v", m, err)
		}
		return res.Task
	}
	answer := func(task *a2a.Task) string {
		a, _ := task.Artifact("response")
		return a.Text()
	}
	wantLines := func(who, got string, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if !strings.Contains(got, "\n"+k+": "+v) && !strings.HasPrefix(got, k+": "+v) {
				t.Errorf("%s: %s: want %q in:\n%s", who, k, v, got)
			}
		}
	}
	refusedAll := map[string]string{"operator-token": "refused", "formation-token": "refused", "canary": "refused",
		"task-store": "refused", "home": "refused", "mur-environ": "refused", "records": "refused", "door": "refused",
		"token-vars": "0"}

	// The script capsule's command.
	runnerTask := ask("runner", probe(dataDir, records, home, port))
	if runnerTask.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("runner: %s %+v", runnerTask.Status.State, runnerTask.Status.Message)
	}
	wantLines("runner", answer(runnerTask), refusedAll)

	// lead's shell binaries and every other tool.
	leadTask := ask("lead", "probe "+port)
	transcript := answer(leadTask)
	if leadTask.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead: %s %+v\n%s", leadTask.Status.State, leadTask.Status.Message, transcript)
	}
	wantLines("lead", transcript, refusedAll)
	if n := strings.Count(transcript, "Permission denied"); n < 4 {
		t.Errorf("%d results say Permission denied, want lead's 3 cat results and worker's, at least:\n%s", n, transcript)
	}
	for _, tool := range []string{"cat", "sh", "background-command", "session-status", "share-file", "call-member", "switch-driver"} {
		if !strings.Contains(transcript, "<untrusted-content source=tool:"+tool+">") {
			t.Errorf("lead's transcript has no result of %s:\n%s", tool, transcript)
		}
	}
	if !strings.Contains(transcript, "[fetch-peer-file] report.txt from lead is now in your workdir") {
		t.Errorf("worker did not fetch the shared file:\n%s", transcript)
	}
	giveUp := ask("lead", "give up")
	if !strings.Contains(answer(giveUp), "nothing here") {
		t.Errorf("worker's end-without-answer did not reach lead: %s\n%s", giveUp.Status.State, answer(giveUp))
	}

	// planner's plan step, on-tool-call hook and delegated sub-capsule: each probe's every try refused.
	planTask := ask("planner", "probe "+port)
	planned := answer(planTask)
	if planTask.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("planner: %s %+v\n%s", planTask.Status.State, planTask.Status.Message, planned)
	}
	for _, where := range []string{"<untrusted-content source=tool:submit-plan>", "hook found: ", "<untrusted-content source=capsule:sub>"} {
		if !strings.Contains(planned, where) {
			t.Errorf("planner's transcript has no %q:\n%s", where, planned)
		}
	}
	for k, v := range refusedAll {
		if n := strings.Count(planned, k+": "+v); n < 3 {
			t.Errorf("planner: %q %d times, want it from the plan, the hook and the sub-capsule:\n%s", k+": "+v, n, planned)
		}
		if strings.Contains(planned, k+": read") {
			t.Errorf("planner: %s was read:\n%s", k, planned)
		}
	}

	// Everything a canary could have reached: the answers and histories at the doors, the records, the
	// data directory (task stores, workdirs) but the planted files, and mur's log lines.
	var places []string
	seen := map[string]string{}
	for _, m := range []string{"lead", "worker", "runner", "planner"} {
		page, err := client(m).ListTasks(ctx, &a2a.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			hl := 1000
			full, err := client(m).GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID, HistoryLength: &hl})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(full)
			seen["task "+string(task.ID)+" at "+m] = string(b)
		}
	}
	for _, dir := range []string{records, dataDir} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch filepath.Base(p) {
			case "operator.token", "formation.token", "canary.txt":
				if filepath.Dir(p) == dataDir {
					return nil
				}
			}
			b, _ := os.ReadFile(p)
			seen[p] = string(b)
			return nil
		})
	}
	seen["mur's log lines"] = logs.String()
	for place, text := range seen {
		places = append(places, place)
		for name, c := range canaries {
			if strings.Contains(text, c) {
				t.Errorf("the %s canary is in %s", name, place)
			}
		}
	}
	if len(places) < 10 {
		t.Errorf("only %d places looked at: %v", len(places), places)
	}
}

// findProcess returns the PID of the process whose command line is exactly argv, or 0.
func findProcess(argv ...string) int {
	want := strings.Join(argv, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && zombie(st) {
				continue
			}
			return pid
		}
	}
	return 0
}

// zombie reports whether a /proc/PID/stat says the process has exited and waits to be reaped.
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestScriptGrandchildGoneAfterSIGKILL: a script capsule's command starts a process that leaves its
// session and process group (setsid); once the member is killed with SIGKILL, that process is gone too.
func TestScriptGrandchildGoneAfterSIGKILL(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no setsid")
	}
	// A sleep no other process runs, so the test finds it by its command line.
	mark := fmt.Sprintf("%d.%06d", 3000+os.Getpid()%1000, time.Now().Nanosecond()/1000)
	root := t.TempDir()
	capsule := filepath.Join(root, "solo")
	os.MkdirAll(capsule, 0o755)
	os.WriteFile(filepath.Join(capsule, "murmur.yaml"), []byte(`name: solo
script:
  command: [sh, -c, 'setsid sleep `+mark+` </dev/null >/dev/null 2>&1 & echo $! > escaped.pid; while [ ! -e "$MUR_CAPSULE_DIR/go" ]; do sleep 0.01; done; echo done']
`), 0o644)
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: orphans\nmembers:\n  - name: solo\n    capsule: ./solo\n"), 0o644)
	t.Cleanup(func() { os.WriteFile(filepath.Join(capsule, "go"), nil, 0o644) })
	dataDir := filepath.Join(root, "data")

	m := startMember(t, rosterPath, dataDir)
	c := a2a.NewClient(m.url+"/a2a", "op", nil)
	if _, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("escape")}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true},
	}); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dataDir, "members", "solo", "work", "escaped.pid")
	var pid int
	for deadline := time.Now().Add(60 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 {
			pid = findProcess("sleep", mark)
		}
		if time.Now().After(deadline) {
			t.Fatal("the command's escaped grandchild never ran")
		}
	}
	t.Cleanup(func() {
		if findProcess("sleep", mark) == pid {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.cmd.Wait()
	for deadline := time.Now().Add(60 * time.Second); findProcess("sleep", mark) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d, started by the script with setsid, outlived the member's SIGKILL by 60s", pid)
		}
	}
}
