package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/spantest"
	"github.com/murmur-run/murmur/member/usage"
)

// inferenceTokens sums the inference records of recs as member/usage counts them.
func inferenceTokens(recs []map[string]any) usage.Tokens {
	var sum usage.Tokens
	for _, r := range recordsOf(recs, "inference") {
		tok, ok := r["tokens"].(map[string]any)
		n := func(k string) int64 { v, _ := tok[k].(float64); return int64(v) }
		sum.Count(ok, n("input"), n("output"), n("cached"), n("cache_write"))
	}
	return sum
}

// getTask reads member's task id through its door.
func (fx *formationFixture) getTask(t *testing.T, member string, id a2a.TaskID) *a2a.Task {
	t.Helper()
	task, err := fx.c[member].GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatalf("GetTask %s at %s: %v", id, member, err)
	}
	return task
}

// usageOf is a task's metadata.murmur.usage; the test fails when it has none.
func usageOf(t *testing.T, task *a2a.Task) usage.Usage {
	t.Helper()
	u, ok := usage.Read(ids.Murmur(task.Metadata))
	if !ok {
		t.Fatalf("task %s has no metadata.murmur.usage: %v", task.ID, task.Metadata)
	}
	return u
}

// One request to lead, which calls worker, which delegates to a sub-capsule: every task's usage holds
// its own tokens (what its inference records say) apart from those it caused, lead's caused tokens are
// worker's total, worker's are its sub-session's, and lead's total is every inference record of the
// run. Each task names the one trace the request made.
func TestUsageRollsUpTheFormation(t *testing.T) {
	tp, _ := spantest.Record(t)
	fx := startFormationWith(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml": agentOf("lead"),
		"lead/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml": strings.Replace(agentOf("worker"), "capabilities: {network: {allow: [localhost]}}\n",
			"capabilities: {network: {allow: [localhost]}, spawn: {allow: [./sub]}}\n", 1),
		"worker/script.yaml":     "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: sub, task: 'part of {{.task}}'}}]\n      - say: waiting for the sub-capsule\n      - say: 'worker got: {{.message}}'\n",
		"worker/sub/murmur.yaml": "name: sub\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n",
		"worker/sub/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'sub did: {{.task}}, at some length so that its tokens are not those of the others'\n",
	}, Tokens{Operator: "op", Formation: "fm"}, func(c *FormationConfig) { c.TracerProvider = tp })
	done := fx.ask(t, "lead", "hello")
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(answerOf(done), "sub did: part of hello") {
		t.Fatalf("lead's task %s: %q", done.Status.State, answerOf(done))
	}

	leadRecs := fx.records(t, "lead")
	starts := recordsOf(leadRecs, "member_call_start")
	if len(starts) != 1 {
		t.Fatalf("%d member_call_start records of lead, want 1", len(starts))
	}
	workerTask := fx.getTask(t, "worker", a2a.TaskID(starts[0]["member_task"].(string)))
	workerRecs := fx.records(t, "worker")
	dlg := recordsOf(workerRecs, "delegation_start")
	if len(dlg) != 1 {
		t.Fatalf("%d delegation_start records of worker, want 1", len(dlg))
	}
	subRecs := traceAt(t, filepath.Join(fx.root, "records", dlg[0]["sub_session"].(string)))

	lead, worker := usageOf(t, fx.getTask(t, "lead", done.ID)), usageOf(t, workerTask)
	leadSelf, workerSelf, subSelf := inferenceTokens(leadRecs), inferenceTokens(workerRecs), inferenceTokens(subRecs)
	if leadSelf.Calls != 3 || workerSelf.Calls != 3 || subSelf.Calls != 1 || subSelf.Input == 0 || leadSelf.Unreported != 0 {
		t.Fatalf("inference records: lead %+v, worker %+v, sub %+v; want 3, 3 and 1 calls, all reported", leadSelf, workerSelf, subSelf)
	}
	wantWorker := usage.Usage{Self: workerSelf, Caused: subSelf, Total: workerSelf.Add(subSelf), Tasks: 1}
	if diff := cmp.Diff(wantWorker, worker); diff != "" {
		t.Errorf("worker's usage (-want +got):\n%s", diff)
	}
	wantLead := usage.Usage{Self: leadSelf, Caused: worker.Total, Total: leadSelf.Add(worker.Total), Tasks: 2}
	if diff := cmp.Diff(wantLead, lead); diff != "" {
		t.Errorf("lead's usage (-want +got):\n%s", diff)
	}
	if all := leadSelf.Add(workerSelf).Add(subSelf); lead.Total != all {
		t.Errorf("lead's total %+v, want every inference record of the run: %+v", lead.Total, all)
	}
	// The answer SendMessage returned carries it too.
	if u, ok := usage.Read(ids.Murmur(done.Metadata)); !ok || u != lead {
		t.Errorf("the answered task's usage %+v (%v), want %+v", u, ok, lead)
	}

	// Each task names the trace it ran in: the one trace of the request, which its records carry.
	trace := ids.Get(ids.Murmur(done.Metadata), ids.MetaTraceID)
	if ends := recordsOf(leadRecs, "task_end"); len(ends) != 1 || trace == nil || ends[0]["trace_id"] != trace {
		t.Errorf("lead's task names trace %v; its task_end record carries %v", trace, ends)
	}
	if got := ids.Get(ids.Murmur(workerTask.Metadata), ids.MetaTraceID); got != trace {
		t.Errorf("worker's task names trace %v, want the request's %v", got, trace)
	}

	// The inference series name the provider of the script driver, which names no model.
	if m := fx.metrics(t, "lead"); !strings.Contains(m, `mur_inference_calls_total{driver="local",member="lead",model="",provider="murmur.script"} 3`) {
		t.Errorf("lead's metrics lack its inference calls by model and provider:\n%s", grepLines(m, "mur_inference_"))
	}
}

// withoutUsage returns a task's metadata.murmur without its usage, which every task that ran carries (the
// test fails when it does not).
func withoutUsage(t *testing.T, md map[string]any) map[string]any {
	t.Helper()
	m, _ := md[ids.Meta].(map[string]any)
	if _, ok := usage.Read(m); !ok {
		t.Errorf("the task's metadata.murmur has no usage: %v", m)
	}
	out := map[string]any{}
	for k, v := range m {
		if k != string(ids.MetaUsage) {
			out[k] = v
		}
	}
	return out
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A task that asks its sender counts in mur_tasks_waiting_input while it waits, and no more once it
// is answered; its usage so far is on it while it waits.
func TestTasksWaitingInputMetric(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":      soloRoster,
		"lead/murmur.yaml": agentOf("lead"),
		"lead/script.yaml": "rules:\n  - match: ''\n    turns:\n      - ask: 'Which currency?'\n      - say: 'in {{.message}}'\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	const waiting = `mur_tasks_waiting_input{member="lead",state="input_required"} `
	if m := fx.metrics(t, "lead"); !strings.Contains(m, waiting+"0") || !strings.Contains(m, `mur_tasks_waiting_input{member="lead",state="auth_required"} 0`) {
		t.Fatalf("before any task:\n%s", grepLines(m, "mur_tasks_waiting_input"))
	}
	ctx := context.Background()
	res, err := fx.c["lead"].SendMessage(ctx, &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("convert 12 dollars")}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Task.ID
	var asking *a2a.Task
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if asking = fx.getTask(t, "lead", id); asking.Status.State == a2a.TaskStateInputRequired || time.Now().After(deadline) {
			break
		}
	}
	if asking.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the task is %s, want input required", asking.Status.State)
	}
	if m := fx.metrics(t, "lead"); !strings.Contains(m, waiting+"1") {
		t.Errorf("while the task waits:\n%s", grepLines(m, "mur_tasks_waiting_input"))
	}
	if u := usageOf(t, asking); u.Self.Calls != 1 || u.Self.Input == 0 {
		t.Errorf("the waiting task's usage so far: %+v, want its one call", u)
	}
	if _, err := fx.c["lead"].SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
		Role: a2a.RoleUser, TaskID: id, Parts: []a2a.Part{a2a.TextPart("euros")}}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); fx.getTask(t, "lead", id).Status.State != a2a.TaskStateCompleted; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the answered task never completed")
		}
	}
	if m := fx.metrics(t, "lead"); !strings.Contains(m, waiting+"0") {
		t.Errorf("once the task was answered:\n%s", grepLines(m, "mur_tasks_waiting_input"))
	}
	if u := usageOf(t, fx.getTask(t, "lead", id)); u.Self.Calls != 2 {
		t.Errorf("the completed task's usage: %+v, want its two calls", u)
	}
}
