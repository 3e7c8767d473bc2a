package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/fakeharness/build"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/harness"
)

// fakeHarness is the fake harness binary, built once for this test process.
func fakeHarness(t *testing.T) string {
	t.Helper()
	bin, err := build.FakeHarness(harnessDir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// processCapsule is a capsule under transport: process running the fake harness in dialect, with
// extra appended (YAML at the top level).
func processCapsule(bin, name, dialect, mode, extra string) string {
	return fmt.Sprintf("name: %s\ntransport: process\nharness:\n  command: [%s, -dialect, %s, -mode, %s]\n  resume: [-resume, \"{session}\"]\n  dialect: %s\ncapabilities: {shell: {allow: [expr]}, network: {allow: [localhost]}}\n%s",
		name, bin, dialect, mode, dialect, extra)
}

// harnessLog reads what the fake harness received: its prompts, tool lists and tool results.
func harnessLog(t *testing.T, fx *formationFixture, memberName string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fx.root, "data", "members", memberName, "work", "fake-harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

func ofKind(log []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, m := range log {
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

func traceOf(t *testing.T, s *member.Session) []map[string]any {
	t.Helper()
	return traceAt(t, s.RecordsDir())
}

// traceAt reads the trace.jsonl of the session whose records directory is dir.
func traceAt(t *testing.T, dir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func recordsOf(trace []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range trace {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

func sessionOf(fx *formationFixture, name string) *member.Session {
	for _, m := range fx.f.Members {
		if m.Name == name {
			return m.Session
		}
	}
	return nil
}

// A member under transport: process: the fake harness lists the session's tools over the loopback tool
// server, calls a shell binary, session-status and call-member, and gets each result byte for byte as
// the http loop hands its model the same call; the task waits for the member's answer and resumes the
// harness's same session with the continuation message as its prompt; session-status's process column
// shows the harness's turns, tokens and quota, and context "unknown".
func TestProcessTransport(t *testing.T) {
	bin := fakeHarness(t)
	for _, dialect := range []string{"murmur-jsonl", "claude-stream-json"} {
		t.Run(dialect, func(t *testing.T) {
			fx := startFormation(t, map[string]string{
				"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n  - {name: mirror, capsule: ./mirror, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
				"lead/murmur.yaml":   processCapsule(bin, "lead", dialect, "normal", ""),
				"worker/murmur.yaml": "name: worker\nscript: {command: [sh, -c, 'read -r l; echo \"worker got: $l\"']}\n",
				// mirror runs the same shell call in the http loop and answers with the text its model got.
				"mirror/murmur.yaml": "name: mirror\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ncapabilities: {shell: {allow: [expr]}}\n",
				"mirror/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: expr, input: {args: ['6', '*', '7']}}]\n      - say: '{{(index .results 0).text}}'\n",
			}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})

			prompt := "call expr {\"args\":[\"6\",\"*\",\"7\"]}\ncall session-status\ncall call-member {\"member\":\"worker\",\"task\":\"ping\"}\nquota five-hour 0.42\nsay waiting"
			task := fx.ask(t, "lead", prompt)
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
			}
			mirror := fx.ask(t, "mirror", "go")
			log := harnessLog(t, fx, "lead")

			// The tools listed: the session's, and no pull-artifact or remove-artifact.
			var names []string
			for _, tool := range ofKind(log, "tools")[0]["tools"].([]any) {
				names = append(names, tool.(map[string]any)["name"].(string))
			}
			if diff := cmp.Diff([]string{"expr", "call-member", "end-without-answer", "session-status"}, names,
				cmpSortStrings); diff != "" {
				t.Errorf("tools listed (-want +got):\n%s", diff)
			}

			results := ofKind(log, "result")
			if len(results) != 3 {
				t.Fatalf("results: %v", results)
			}
			exprText := results[0]["text"].(string)
			if want := "<untrusted-content source=tool:expr>\nexit_code: 0\nstatus: ok\noutput_bytes: 3\noutput_shown: all\n\n42\n</untrusted-content>"; exprText != want {
				t.Errorf("expr's result:\n got %q\nwant %q", exprText, want)
			}
			if got := answerOf(mirror); got != exprText {
				t.Errorf("the http loop's text for the same call differs:\nhttp    %q\nprocess %q", got, exprText)
			}
			call := regexp.MustCompile(`mcl_[0-9a-z]{26}`).FindString(results[2]["text"].(string))
			workerTask := regexp.MustCompile(`tsk_[0-9a-z]{26}`).FindString(results[2]["text"].(string))
			wantCall := "<untrusted-content source=tool:call-member>\n" +
				`{"call_id":"` + call + `","member":"worker","status":"started","task_id":"` + workerTask + `"}` + "\n" +
				"</untrusted-content>\n" +
				"[call-member] worker is now working on call " + call + ". Its answer is not in this result and no tool fetches it: the runtime adds it to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling worker again before its answer arrives is refused."
			if diff := cmp.Diff(wantCall, results[2]["text"]); diff != "" {
				t.Errorf("call-member's result (-want +got):\n%s", diff)
			}
			for i, r := range results {
				if r["is_error"] != false {
					t.Errorf("result %d is an error: %v", i, r)
				}
			}
			// session-status in the task: at most the one turn closed before it (expr's; its event is read
			// from the harness's stdout as the call arrives over HTTP, so it may not be counted yet),
			// context "unknown", no quota yet.
			st := statusObject(t, results[1]["text"].(string))
			if turns := st["turns"].(map[string]any); (turns["used"] != 0.0 && turns["used"] != 1.0) || turns["cap"] != "none" {
				t.Errorf("turns %v", turns)
			}
			if st["context"] != "unknown" || st["quota"] != nil {
				t.Errorf("context %v, quota %v", st["context"], st["quota"])
			}

			// The resume carried the continuation message, byte for byte, into the harness's same session.
			prompts := ofKind(log, "prompt")
			if len(prompts) != 2 || prompts[1]["resumed"] != true || prompts[1]["session"] != prompts[0]["session"] {
				t.Fatalf("prompts: %v", prompts)
			}
			continuation := "[call-member] call " + call + " to worker ended completed:\n" +
				"<untrusted-content source=member:worker>\nworker got: ping\n</untrusted-content>\n\n" +
				"[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work."
			if diff := cmp.Diff(continuation, prompts[1]["prompt"]); diff != "" {
				t.Errorf("continuation (-want +got):\n%s", diff)
			}
			if want := "resumed " + prompts[0]["session"].(string) + ": " + continuation; answerOf(task) != want {
				t.Errorf("answer %q", answerOf(task))
			}

			// After the task: tokens are the sums of the harness's closed turns (100 a turn plus the
			// prompt's length in, 10 plus 10 or the answer's length out), quota its latest window.
			lead := sessionOf(fx, "lead")
			snap := lead.StatusSnapshot()
			p := int64(len(prompt))
			c := int64(len(continuation))
			in := (100 + p) + (200 + p) + (300 + p) + (400 + p) + (100 + c)
			out := int64(20+20+20) + (10 + int64(len("waiting"))) + (10 + int64(len(answerOf(task))))
			if snap.Tokens.Input != in || snap.Tokens.Output != out || snap.SpendTokens != in+out || snap.Context != nil {
				t.Errorf("tokens %+v spend %d, want input %d output %d", snap.Tokens, snap.SpendTokens, in, out)
			}
			if len(snap.Quota) != 1 || snap.Quota[0].Name != "five-hour" || *snap.Quota[0].Used != 0.42 ||
				snap.Quota[0].ResetsAt != "2026-10-20T15:00:00Z" || *snap.Quota[0].WindowMinutes != 300 || snap.Quota[0].State != "ok" {
				t.Errorf("quota %+v", snap.Quota)
			}

			// A second task's session-status shows the quota, never acted on.
			task2 := fx.ask(t, "lead", "call session-status\nsay ok")
			if task2.Status.State != a2a.TaskStateCompleted || answerOf(task2) != "ok" {
				t.Fatalf("second task %s: %v", task2.Status.State, task2.Status.Message)
			}
			st2 := statusObject(t, ofKind(harnessLog(t, fx, "lead"), "result")[3]["text"].(string))
			if diff := cmp.Diff(map[string]any{"used": 0.0, "cap": "none"}, st2["turns"]); diff != "" {
				t.Errorf("turns at the second task's start (-want +got):\n%s", diff)
			}
			wantQuota := []any{map[string]any{"name": "five-hour", "used": 0.42, "resets_at": "2026-10-20T15:00:00Z", "window_minutes": 300.0, "state": "ok"}}
			if diff := cmp.Diff(wantQuota, st2["quota"]); diff != "" {
				t.Errorf("quota (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"input": float64(in), "output": float64(out), "cached": "unknown", "cache_write": "unknown", "unreported_calls": 0.0}, st2["tokens"]); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
			if st2["context"] != "unknown" {
				t.Errorf("context %v", st2["context"])
			}

			// The records: the session's transport, one harness_run per run, an inference record per
			// closed turn, the tool calls, the continuation.
			trace := traceOf(t, lead)
			start := recordsOf(trace, "session_start")[0]
			if start["transport"] != "process" || !strings.HasPrefix(start["tool_server"].(string), "http://127.0.0.1:") {
				t.Errorf("session_start %v", start)
			}
			runs := recordsOf(trace, "harness_run")
			if len(runs) != 3 || runs[0]["resumed"] != false || runs[1]["resumed"] != true || runs[1]["harness_session"] != prompts[0]["session"] ||
				runs[0]["exit_code"] != 0.0 || runs[0]["answered"] != true {
				t.Errorf("harness_run records: %v", runs)
			}
			if n := len(recordsOf(trace, "inference")); n != 7 {
				t.Errorf("%d inference records, want 7", n)
			}
			var tools []string
			for _, r := range recordsOf(trace, "tool_call") {
				tools = append(tools, r["tool"].(string)+" "+r["status"].(string))
			}
			if diff := cmp.Diff([]string{"expr ok", "session-status ok", "call-member ok", "session-status ok"}, tools); diff != "" {
				t.Errorf("tool_call records (-want +got):\n%s", diff)
			}
			if n := len(recordsOf(trace, "task_continued")); n != 1 {
				t.Errorf("%d task_continued records", n)
			}
			if n := len(recordsOf(trace, "session_status")); n != 2 {
				t.Errorf("%d session_status records", n)
			}
			// The MCP config the harness read is 0600 and holds the token; the harness's workdir is not
			// where it lives.
			fi, err := os.Stat(filepath.Join(fx.root, "data", "members", "lead", "run", lead.ID(), harness.MCPConfigFile))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("MCP config: %v %v", fi, err)
			}
		})
	}
}

// harnessLogIf is what the fake harness of memberName logged of kind, or nothing while it has no log.
func harnessLogIf(fx *formationFixture, memberName, kind string) []string {
	b, _ := os.ReadFile(filepath.Join(fx.root, "data", "members", memberName, "work", "fake-harness.jsonl"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"kind":"`+kind+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// harnessPIDs lists the processes running bin with an argument that holds marker (host PIDs: the
// harness is its PID namespace's init and knows itself as 1).
func harnessPIDs(t *testing.T, bin, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && args[0] == bin && strings.Contains(string(b), marker) {
			out = append(out, pid)
		}
	}
	return out
}

var cmpSortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// statusObject is the JSON object inside a session-status result's fence.
func statusObject(t *testing.T, text string) map[string]any {
	t.Helper()
	body := strings.TrimPrefix(text, "<untrusted-content source=tool:session-status>\n")
	body, _, _ = strings.Cut(body, "\n</untrusted-content>")
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("session-status result %q: %v", text, err)
	}
	return m
}

// A harness that fails, or prints garbage, or is killed mid-task: the task ends with a clear status
// message (or completes, for garbage), nothing is lost, and the member takes the next task.
func TestProcessHarnessFailures(t *testing.T) {
	bin := fakeHarness(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: fail, capsule: ./fail, listen: '127.0.0.1:0'}\n  - {name: junk, capsule: ./junk, listen: '127.0.0.1:0'}\n  - {name: norm, capsule: ./norm, listen: '127.0.0.1:0'}\n",
		"fail/murmur.yaml": processCapsule(bin, "fail", "murmur-jsonl", "fail", ""),
		"junk/murmur.yaml": processCapsule(bin, "junk", "claude-stream-json", "garbage", ""),
		"norm/murmur.yaml": processCapsule(bin, "norm", "murmur-jsonl", "normal", ""),
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})

	task := fx.ask(t, "fail", "say hi")
	want := "the harness " + bin + " exited with status 3 before reporting any event; its stderr ends: fakeharness: failing before any event, as -mode fail asks"
	if task.Status.State != a2a.TaskStateFailed || task.Status.Message.Text() != want {
		t.Errorf("fail: %s %q", task.Status.State, task.Status.Message.Text())
	}

	task = fx.ask(t, "junk", "call expr {\"args\":[\"1\"]}\nsay still fine")
	if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "still fine" {
		t.Errorf("garbage: %s %v", task.Status.State, task.Status.Message)
	}
	garbage := recordsOf(traceOf(t, sessionOf(fx, "junk")), "harness_output")
	if len(garbage) == 0 || garbage[0]["text"] != "fakeharness: this line is no event" || garbage[0]["reason"] != "not a JSON object" {
		t.Errorf("harness_output records: %v", garbage)
	}

	// Killed mid-task from outside (as the kernel's OOM killer would): once it has had its tool result.
	ended := make(chan *a2a.Task, 1)
	go func() { ended <- fx.ask(t, "norm", "call expr {\"args\":[\"2\"]}\nhang kill-me") }()
	for len(harnessLogIf(fx, "norm", "result")) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	pids := harnessPIDs(t, bin, "kill-me")
	if len(pids) != 1 {
		t.Fatalf("harness processes: %v", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	task = <-ended
	want = "the harness " + bin + " was killed by signal 9 (killed) after 1 event(s)"
	if task.Status.State != a2a.TaskStateFailed || task.Status.Message.Text() != want {
		t.Errorf("killed: %s %q", task.Status.State, task.Status.Message.Text())
	}
	task = fx.ask(t, "norm", "say next")
	if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "next" {
		t.Errorf("the task after: %s %v", task.Status.State, task.Status.Message)
	}
}

// A harness that never exits is ended, with everything it started, at the session's deadline; the
// first bridged tool result inside the notice margin carried SPEC's deadline notice, and only that one.
func TestProcessHarnessNeverExits(t *testing.T) {
	bin := fakeHarness(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: slow, capsule: ./slow, listen: '127.0.0.1:0'}\n",
		"slow/murmur.yaml": processCapsule(bin, "slow", "murmur-jsonl", "normal", "deadline: 4s\nlifecycle: {deadline_notice_secs: 3600}\n"),
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
	task := fx.ask(t, "slow", "call expr {\"args\":[\"1\"]}\ncall expr {\"args\":[\"2\"]}\nhang never-exits")
	if task.Status.State != a2a.TaskStateFailed || !strings.HasPrefix(task.Status.Message.Text(), "the session reached its deadline, ") {
		t.Fatalf("task %s %q", task.Status.State, task.Status.Message.Text())
	}
	log := harnessLog(t, fx, "slow")
	results := ofKind(log, "result")
	if len(results) != 2 {
		t.Fatalf("results %v", results)
	}
	notice := regexp.MustCompile(`\n</untrusted-content>\nSession deadline: the runtime ends this session at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, in \d seconds\.$`)
	if !notice.MatchString(results[0]["text"].(string)) {
		t.Errorf("the first result has no notice: %q", results[0]["text"])
	}
	if strings.Contains(results[1]["text"].(string), "Session deadline") {
		t.Errorf("the second result has a notice too: %q", results[1]["text"])
	}
	if pids := harnessPIDs(t, bin, "never-exits"); len(pids) > 0 {
		t.Errorf("the harness is still there: %v", pids)
	}
	if n := len(recordsOf(traceOf(t, sessionOf(fx, "slow")), "deadline_notice")); n != 1 {
		t.Errorf("%d deadline_notice records", n)
	}
}

// A harness that calls end-without-answer and keeps going until it finishes: its task ends without an
// answer all the same (SPEC "How the task ends"), and the member that sent it is told none came.
func TestProcessEndWithoutAnswerKeptGoing(t *testing.T) {
	bin := fakeHarness(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: mid, capsule: ./mid, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [mid]}\n  - {from: mid, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: mid, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"mid/murmur.yaml":    processCapsule(bin, "mid", "murmur-jsonl", "normal", ""),
		"worker/murmur.yaml": "name: worker\nscript: {command: [cat]}\n",
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
	task := fx.ask(t, "lead", "call end-without-answer {\"reason\":\"the data is not mine to give\"}\ncall expr {\"args\":[\"1\"]}\nsay I kept going anyway")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %v", task.Status.State, task.Status.Message)
	}
	got := answerOf(task)
	want := regexp.MustCompile(`^\[call-member\] call mcl_[0-9a-z]{26} to mid ended no_answer, with no answer from mid:\n<untrusted-content source=member:mid>\nthe data is not mine to give\n</untrusted-content>\n`)
	if !want.MatchString(got) {
		t.Errorf("lead's answer:\n%s", got)
	}
	results := ofKind(harnessLog(t, fx, "mid"), "result")
	if len(results) != 2 || !strings.HasPrefix(results[0]["text"].(string), "<untrusted-content source=tool:end-without-answer>\n") ||
		!strings.HasSuffix(results[0]["text"].(string), "\n[end-without-answer] This task ends without an answer once this turn's tool calls finish, and lead is told you gave none. The other tool calls of the same turn still run.") {
		t.Errorf("mid's harness got: %v", results)
	}
	trace := traceOf(t, sessionOf(fx, "mid"))
	ends := recordsOf(trace, "task_end")
	if len(ends) != 1 || ends[0]["exit_status"] != "no_answer" {
		t.Errorf("mid's task_end: %v", ends)
	}
	if runs := recordsOf(trace, "harness_run"); len(runs) != 1 || runs[0]["answered"] != true {
		t.Errorf("mid's harness_run: %v", runs)
	}
	if n := len(recordsOf(trace, "task_failed")); n != 0 {
		t.Errorf("%d task_failed records for a no_answer task", n)
	}
}

// A harness that calls a tool the session does not offer gets the runtime's refusal, the http loop's
// words through the session's one dispatch, as a tool error; not a protocol error of the MCP SDK's.
func TestProcessUnknownToolRefused(t *testing.T) {
	bin := fakeHarness(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml": processCapsule(bin, "lead", "murmur-jsonl", "normal", ""),
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
	task := fx.ask(t, "lead", "call nope {}\nsay done")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
	}
	results := ofKind(harnessLog(t, fx, "lead"), "result")
	if len(results) != 1 {
		t.Fatalf("results: %v", results)
	}
	want := `no tool named "nope" in this session: a shell binary needs capabilities.shell.allow, an artifact needs tools: in murmur.yaml. Tools you can call: `
	if text, _ := results[0]["text"].(string); results[0]["is_error"] != true || !strings.Contains(text, want) {
		t.Errorf("the unknown tool's result: %v, want an error saying %q", results[0], want)
	}
}
