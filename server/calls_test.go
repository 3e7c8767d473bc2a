package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/roster"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

type formationFixture struct {
	root string
	f    *Formation
	logs *lockedBuffer
	c    map[string]*a2a.Client
}

// startFormation writes files under a temp root (roster.yaml among them) and starts every member.
func startFormation(t *testing.T, files map[string]string, tokens Tokens) *formationFixture {
	t.Helper()
	return startFormationAt(t, files, tokens, nil)
}

// startFormationAt is startFormation on a clock of the test's; nil is the real one.
func startFormationAt(t *testing.T, files map[string]string, tokens Tokens, now func() time.Time) *formationFixture {
	t.Helper()
	return startFormationWith(t, files, tokens, func(c *FormationConfig) { c.Now = now })
}

// startFormationWith is startFormation with a configuration the test changes first.
func startFormationWith(t testing.TB, files map[string]string, tokens Tokens, change func(*FormationConfig)) *formationFixture {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o755)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg := FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: tokens, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	change(&cfg)
	f, err := StartFormation(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Shutdown(ctx)
	})
	fx := &formationFixture{root: root, f: f, logs: logs, c: map[string]*a2a.Client{}}
	for _, m := range f.Members {
		fx.c[m.Name] = a2a.NewClient(m.URL+"/a2a", tokens.Operator, nil)
	}
	return fx
}

func (fx *formationFixture) ask(t testing.TB, name, text string) *a2a.Task {
	t.Helper()
	res, err := fx.c[name].SendMessage(context.Background(), &a2a.SendMessageRequest{
		Message: &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Task
}

// askUntil sends text to member without waiting for the task to end, then polls the task until it is
// working with the status message status, and returns its id.
func (fx *formationFixture) askUntil(t *testing.T, name, text, status string) a2a.TaskID {
	t.Helper()
	ctx := context.Background()
	res, err := fx.c[name].SendMessage(ctx, &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, _ := fx.c[name].GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if got.Status.State == a2a.TaskStateWorking && got.Status.Message != nil && got.Status.Message.Text() == status {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's task never showed %q: %s %+v", name, status, got.Status.State, got.Status.Message)
		}
	}
}

func answerOf(t *a2a.Task) string {
	a, _ := t.Artifact("response")
	return a.Text()
}

const agentYAML = "name: %s\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ncapabilities: {network: {allow: [localhost]}}\n"

func agentOf(name string) string { return strings.Replace(agentYAML, "%s", name, 1) }

func TestCallMemberThroughRealDoors(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{(index .results 0).text}}\\n---\\n{{.message}}\"\n",
		"worker/murmur.yaml": "name: worker\nscript: {command: [sh, -c, 'read -r l; echo \"worker got: $l\"']}\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "hello")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %+v", task.Status.State, task.Status.Message)
	}
	got := answerOf(task)
	call := regexp.MustCompile(`mcl_[0-9a-z]{26}`).FindString(got)
	memberTask := regexp.MustCompile(`tsk_[0-9a-z]{26}`).FindString(got)
	want := "<untrusted-content source=tool:call-member>\n" +
		`{"call_id":"` + call + `","member":"worker","status":"started","task_id":"` + memberTask + `"}` + "\n" +
		"</untrusted-content>\n" +
		"[call-member] worker is now working on call " + call + ". Its answer is not in this result and no tool fetches it: the runtime adds it to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling worker again before its answer arrives is refused.\n" +
		"---\n" +
		"[call-member] call " + call + " to worker ended completed:\n" +
		"<untrusted-content source=member:worker>\n" +
		"worker got: hello\n" +
		"</untrusted-content>\n\n" +
		"[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work."
	if got != want {
		t.Errorf("what lead's model received:\n%s\nwant:\n%s", got, want)
	}
	// The worker's task came from lead, as a peer, with lead's trust.
	wt, err := fx.c["worker"].GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(memberTask)})
	if err != nil {
		t.Fatal(err)
	}
	if m := wt.Metadata["murmur"].(map[string]any); m["origin"] != "peer" || m["trust"] != "trusted" {
		t.Errorf("worker's task metadata %v", m)
	}
	recs := fx.records(t, "lead")
	for _, typ := range []string{"member_call_start", "member_call", "task_continued"} {
		if n := count(recs, typ); n != 1 {
			t.Errorf("%d %s records, want 1", n, typ)
		}
	}
	if count(recs, "task_reopened") != 0 {
		t.Error("continuing with answers wrote task_reopened")
	}
	metrics := fx.metrics(t, "lead")
	for _, want := range []string{`mur_member_calls_total{callee="worker",member="lead",status="completed"} 1`,
		`mur_member_call_duration_seconds_count{callee="worker",member="lead"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("lead's /metrics lacks %s", want)
		}
	}
}

// records returns every trace record of the member's sessions.
func (fx *formationFixture) records(t *testing.T, name string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range fx.f.Members {
		if m.Name != name {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.Session.RecordsDir(), "trace.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r map[string]any
			json.Unmarshal([]byte(line), &r)
			out = append(out, r)
		}
	}
	return out
}

func count(recs []map[string]any, typ string) int {
	n := 0
	for _, r := range recs {
		if r["type"] == typ {
			n++
		}
	}
	return n
}

func TestEndWithoutAnswerDownAChain(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n  - {name: helper, capsule: ./helper, listen: '127.0.0.1:0'}\n" +
			"reach:\n  - {from: lead, to: [worker]}\n  - {from: worker, to: [helper]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml": agentOf("worker"),
		"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: helper, task: '{{.task}}'}}]\n      - say: waiting\n      - call: [{tool: end-without-answer, input: {reason: 'helper gave me nothing'}}]\n      - say: should not run\n",
		"helper/murmur.yaml": "name: helper\nscript: {command: [sh, -c, 'echo helper is broken >&2; exit 3']}\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "do the thing")
	got := answerOf(task)
	callIDs := regexp.MustCompile(`mcl_[0-9a-z]{26}`).FindAllString(got, -1)
	if len(callIDs) == 0 {
		t.Fatalf("lead saw %q", got)
	}
	call := callIDs[0]
	want := "[call-member] call " + call + " to worker ended no_answer, with no answer from worker:\n" +
		"<untrusted-content source=member:worker>\n" +
		"helper gave me nothing\n" +
		"</untrusted-content>\n\n" +
		"[call-member] No answer came from: worker (call " + call + ", no_answer; further down, no answer came from helper (failed)). What you asked of them has not been done by them: do not present an answer of your own as theirs.\n\n" +
		"[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed."
	if got != want {
		t.Errorf("what lead's model received:\n%s\nwant:\n%s", got, want)
	}
	// The worker's own task: failed with the reason, noAnswer, and helper below.
	page, err := fx.c["worker"].ListTasks(context.Background(), &a2a.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 1 {
		t.Fatalf("worker's tasks: %v %v", page, err)
	}
	wt := page.Tasks[0]
	m := wt.Metadata["murmur"].(map[string]any)
	below, _ := json.Marshal(m["noAnswerBelow"])
	if wt.Status.State != a2a.TaskStateFailed || wt.Status.Message.Text() != "helper gave me nothing" || m["noAnswer"] != true ||
		string(below) != `[{"member":"helper","status":"failed"}]` {
		t.Errorf("worker's task %s %q %v", wt.Status.State, wt.Status.Message.Text(), m)
	}
	recs := fx.records(t, "worker")
	if count(recs, "task_failed") != 0 {
		t.Error("a task ending without an answer wrote task_failed")
	}
	for _, r := range recs {
		if r["type"] == "task_end" && r["exit_status"] != "no_answer" {
			t.Errorf("task_end %v, want exit_status no_answer", r)
		}
	}
	var worker *RunningMember
	for _, rm := range fx.f.Members {
		if rm.Name == "worker" {
			worker = rm
		}
	}
	// out/result.txt is written by the records' result writer just after the task ends.
	const wantResult = "no answer: helper gave me nothing"
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); string(b) != wantResult && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ = os.ReadFile(filepath.Join(worker.Session.RecordsDir(), "out", "result.txt"))
	}
	if string(b) != wantResult {
		t.Errorf("worker's out/result.txt = %q", b)
	}
}

// SPEC, end-without-answer's last paragraph: a task that answers in text while a member it called gave
// no answer completes, its GetTask result carries metadata.murmur.noAnswerBelow, and its caller reads its
// answer with the gap line.
func TestAnswerWithAGapDownAChain(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n  - {name: helper, capsule: ./helper, listen: '127.0.0.1:0'}\n" +
			"reach:\n  - {from: lead, to: [worker]}\n  - {from: worker, to: [helper]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml": agentOf("worker"),
		"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: helper, task: '{{.task}}'}}]\n      - say: waiting\n      - say: my own guess, without helper\n",
		"helper/murmur.yaml": "name: helper\nscript: {command: [sh, -c, 'echo helper is broken >&2; exit 3']}\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	got := answerOf(fx.ask(t, "lead", "do the thing"))
	call := regexp.MustCompile(`mcl_[0-9a-z]{26}`).FindString(got)
	want := "[call-member] call " + call + " to worker ended completed:\n" +
		"<untrusted-content source=member:worker>\n" +
		"my own guess, without helper\n" +
		"</untrusted-content>\n\n" +
		"[call-member] worker (call " + call + ") answered without an answer from helper (failed): any part of its answer that stands in for theirs is worker's own, not theirs.\n\n" +
		"[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed."
	if got != want {
		t.Errorf("what lead's model received:\n%s\nwant:\n%s", got, want)
	}
	page, err := fx.c["worker"].ListTasks(context.Background(), &a2a.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 1 {
		t.Fatalf("worker's tasks: %v %v", page, err)
	}
	wt := page.Tasks[0]
	m := wt.Metadata["murmur"].(map[string]any)
	below, _ := json.Marshal(m["noAnswerBelow"])
	if wt.Status.State != a2a.TaskStateCompleted || m["noAnswer"] != nil || string(below) != `[{"member":"helper","status":"failed"}]` {
		t.Errorf("worker's task %s %v, want completed with helper in noAnswerBelow", wt.Status.State, m)
	}
}

func TestTheModelNeverSeesTheDoorOrTheToken(t *testing.T) {
	buf := make([]byte, 16)
	rand.Read(buf)
	canary := "canary-" + hex.EncodeToString(buf)
	port := freePort(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:" + port + "'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.transcript}}'\n",
		"worker/murmur.yaml": "name: worker\nscript: {command: [sh, -c, 'read -r l; echo \"worker got: $l\"']}\n",
	}, Tokens{Operator: "op-" + canary[7:15], Formation: canary})
	transcript := answerOf(fx.ask(t, "lead", "hello"))
	if !strings.Contains(transcript, "worker got: hello") {
		t.Fatalf("the call did not go through:\n%s", transcript)
	}
	var everything strings.Builder
	everything.WriteString(transcript)
	everything.WriteString(fx.logs.String())
	filepath.Walk(filepath.Join(fx.root, "records"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			everything.Write(b)
		}
		return nil
	})
	for _, secret := range []string{canary, ":" + port} {
		if strings.Contains(everything.String(), secret) {
			t.Errorf("%q reached the model, a record or a log line", secret)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

const gatedWorker = "name: worker\nscript:\n  command: [sh, -c, 'read -r l; while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; echo \"done: $l\"']\n"

func (fx *formationFixture) release() {
	os.WriteFile(filepath.Join(fx.root, "worker", "go"), nil, 0o644)
}

func TestWaitingOnACallThenCanceled(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml": gatedWorker,
	}, Tokens{Operator: "op", Formation: "fm"})
	t.Cleanup(fx.release)
	ctx := context.Background()
	id := fx.askUntil(t, "lead", "slow job", "waiting on call-member: 1 call(s) outstanding")
	got, err := fx.c["lead"].CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel while waiting: %+v %v", got, err)
	}
	// The status message says the callee's task goes on, and how to stop it.
	if m := got.Status.Message; m == nil || m.Text() != fmt.Sprintf(member.CanceledCallsRunning, 1) {
		t.Errorf("the canceled task's status message %+v, want it to say the worker's task keeps running", m)
	}
	var abandoned bool
	for _, r := range fx.records(t, "lead") {
		if r["type"] == "member_call" && r["status"] == "abandoned" && r["delivered"] == false {
			abandoned = true
		}
	}
	if !abandoned {
		t.Error("the call of a canceled task was not recorded abandoned")
	}
	// The worker's WORKING status rides the store's next group commit, so it may show SUBMITTED for a
	// moment; what must never be seen is its task ended.
	var page *a2a.ListTasksResponse
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		page, _ = fx.c["worker"].ListTasks(ctx, &a2a.ListTasksRequest{})
		if page == nil || len(page.Tasks) != 1 || page.Tasks[0].Status.State != a2a.TaskStateSubmitted || time.Now().After(deadline) {
			break
		}
	}
	if page == nil || len(page.Tasks) != 1 || page.Tasks[0].Status.State != a2a.TaskStateWorking {
		t.Errorf("the worker's task must be left running: %+v", page)
	}
}

func TestTheLastAllowedTurnDoesNotWait(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   strings.Replace(agentOf("lead"), "script.yaml}\n", "script.yaml}\n  max_turns: 2\n", 1),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: out of turns\n",
		"worker/murmur.yaml": gatedWorker,
	}, Tokens{Operator: "op", Formation: "fm"})
	t.Cleanup(fx.release)
	task := fx.ask(t, "lead", "job")
	if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "out of turns" {
		t.Fatalf("%s %q", task.Status.State, answerOf(task))
	}
	recs := fx.records(t, "lead")
	if count(recs, "task_continued") != 0 || count(recs, "task_reopened") != 0 {
		t.Error("the last allowed turn continued or reopened")
	}
	found := false
	for _, r := range recs {
		if r["type"] == "member_call" {
			found = r["status"] == "abandoned" && r["delivered"] == false
		}
	}
	if !found {
		t.Error("the outstanding call was not recorded abandoned")
	}
}
