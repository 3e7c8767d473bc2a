package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// A member with no room rejects a task with SPEC's status text and metadata.murmur.busy, and a member
// that calls it offers the task again until it takes it (SPEC "A busy member"), across real doors.
func TestBusyMemberIsMarkedAndOfferedAgain(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{.message}}\"\n",
		"worker/murmur.yaml": strings.Replace(gatedScript, "name: gated", "name: worker", 1),
	}, Tokens{Operator: "op", Formation: "fm"})
	ctx := context.Background()
	send := func(name, text string) *a2a.Task {
		t.Helper()
		res, err := fx.c[name].SendMessage(ctx, &a2a.SendMessageRequest{
			Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
			Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Task
	}
	busyMark := func(task *a2a.Task) any { return ids.Get(ids.Murmur(task.Metadata), ids.MetaBusy) }

	first := send("worker", "first")
	if first.Status.State == a2a.TaskStateRejected || busyMark(first) != nil {
		t.Fatalf("worker's first task: %s, busy %v", first.Status.State, busyMark(first))
	}
	second := send("worker", "second")
	text := ""
	if second.Status.Message != nil {
		text = second.Status.Message.Text()
	}
	if second.Status.State != a2a.TaskStateRejected || text != "task rejected: capsule is busy" || busyMark(second) != true {
		t.Fatalf("worker's second task: %s %q, busy %v; want rejected with SPEC's text and the mark", second.Status.State, text, busyMark(second))
	}

	lead := send("lead", "hello")
	for deadline := time.Now().Add(20 * time.Second); count(fx.records(t, "lead"), "member_call_busy") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lead never recorded worker as busy")
		}
	}
	os.WriteFile(filepath.Join(fx.root, "worker", "go"), nil, 0o644) // worker's first task ends; the next offer is taken
	var done *a2a.Task
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := fx.c["lead"].GetTask(ctx, &a2a.GetTaskRequest{ID: lead.ID})
		if err == nil && got.Status.State.Terminal() {
			done = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lead's task never ended: %+v %v", got, err)
		}
	}
	if got := answerOf(done); done.Status.State != a2a.TaskStateCompleted || !strings.Contains(got, " to worker ended completed:") || !strings.Contains(got, "done: hello") {
		t.Errorf("lead's task %s answered:\n%s\nwant worker's answer to the call it offered again", done.Status.State, got)
	}
	recs := fx.records(t, "lead")
	if n := count(recs, "member_call_start"); n != 1 {
		t.Errorf("%d member_call_start records, want 1", n)
	}
	for _, r := range recs {
		if r["type"] == "member_call" && r["status"] != "completed" {
			t.Errorf("the call ended %v, want completed", r["status"])
		}
	}
}
