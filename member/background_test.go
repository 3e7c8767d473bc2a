package member

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func bgSession(t *testing.T, script string) (*testSession, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(agentCapsule("capabilities:\n  shell: {allow: [sh]}\nlifecycle: {shell_grace_secs: 1}\n")), 0o644)
	os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o644)
	s, _ := startSessionIn(t, root, dir)
	return s, root
}

func TestCommandMovesToTheBackgroundAndIsWaitedFor(t *testing.T) {
	s, _ := bgSession(t, "rules:\n  - match: ''\n    turns:\n"+
		"      - call: [{tool: sh, input: {args: ['-c', 'echo start; sleep 2; echo end']}}]\n"+
		"      - call: [{tool: background-command, input: {operation: wait, work_id: '{{(index .results 0).data.work_id}}', wait_secs: 30}}]\n"+
		"      - say: \"{{.transcript}}\"\n")
	got := answer(s.run(t, "x", Origin{}))
	id := regexp.MustCompile(`wrk_[0-9a-f]{32}`).FindString(got)
	if id == "" {
		t.Fatalf("no work id in:\n%s", got)
	}
	if !strings.Contains(got, "work_id: "+id+"\nstate: running\n") ||
		!strings.Contains(got, "moved to the background as "+id) {
		t.Errorf("the shell call did not return the work id:\n%s", got)
	}
	log := filepath.Join(s.RecordsDir(), "logs", id+".log")
	if !strings.Contains(got, "work_id: "+id+"\nstate: exited\n") || !strings.Contains(got, "exit_code: 0\nstatus: ok\noutput: "+log+"\noutput_bytes: 10\noutput_shown: all\n\nstart\nend\n") {
		t.Errorf("wait did not report the exit:\n%s", got)
	}
	if b, err := os.ReadFile(log); err != nil || string(b) != "start\nend\n" {
		t.Errorf("log %q %v", b, err)
	}
	n := 0
	for _, r := range records(t, s.Session) {
		if r["type"] == "background_command" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d background_command records, want 1", n)
	}
}

func TestStopKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	s, root := bgSession(t, "rules:\n  - match: ''\n    turns:\n"+
		"      - call: [{tool: sh, input: {args: ['-c', 'trap \"\" TERM; (trap \"\" TERM; sleep 30; touch late) & sleep 30']}}]\n"+
		"      - call: [{tool: background-command, input: {operation: stop, work_id: '{{(index .results 0).data.work_id}}'}}]\n"+
		"      - say: '{{(index .results 0).output}}'\n")
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "state: stopped\n") || !strings.Contains(got, "exit_code: 137\nstatus: error\n") {
		t.Errorf("stop:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(root, "work", "late")); err == nil {
		t.Error("a process of the stopped command's group survived")
	}
}

func TestTaskEndNamesRunningCommandsAndTheSessionEndKillsThem(t *testing.T) {
	s, root := bgSession(t, "rules:\n  - match: ''\n    turns:\n"+
		"      - call: [{tool: sh, input: {args: ['-c', 'sleep 3; touch survived']}}]\n"+
		"      - say: done\n")
	task := s.run(t, "x", Origin{})
	running, _ := murmurMeta(task)["runningCommands"].([]any)
	if len(running) != 1 {
		t.Fatalf("task metadata %v, want one running command", murmurMeta(task))
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ended bool
	for _, r := range records(t, s.Session) {
		if r["type"] == "task_end" {
			l, _ := r["runningCommands"].([]any)
			ended = len(l) == 1 && l[0] == running[0]
		}
	}
	if !ended {
		t.Error("task_end does not name the running command")
	}
	if _, err := os.Stat(filepath.Join(root, "work", "survived")); err == nil {
		t.Error("the command outlived its session")
	}
}

func TestStopReachesASetsidEscaper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace of its own needs root")
	}
	s, root := bgSession(t, "rules:\n  - match: ''\n    turns:\n"+
		"      - call: [{tool: sh, input: {args: ['-c', 'setsid sh -c \"sleep 2; touch escaped\" & nohup sh -c \"sleep 2; touch nohup\" >/dev/null 2>&1 & sleep 30']}}]\n"+
		"      - call: [{tool: background-command, input: {operation: stop, work_id: '{{(index .results 0).data.work_id}}'}}]\n"+
		"      - say: '{{(index .results 0).output}}'\n")
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "state: stopped\n") {
		t.Fatalf("stop:\n%s", got)
	}
	time.Sleep(3 * time.Second) // past the escapers' own sleep
	for _, f := range []string{"escaped", "nohup"} {
		if _, err := os.Stat(filepath.Join(root, "work", f)); err == nil {
			t.Errorf("the %s process outlived the stop", f)
		}
	}
}
