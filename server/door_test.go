package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"
)

const echoAgent = `name: echo
description: echoes
inference:
  driver: local
  choices:
    local: {driver: script}
`

func sendTask(t *testing.T, c *a2aclient.Client, text string, immediately bool) *a2ago.Task {
	t.Helper()
	req := &a2ago.SendMessageRequest{Message: userMessage(text)}
	if immediately {
		req.Config = &a2ago.SendMessageConfig{ReturnImmediately: true}
	}
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatalf("SendMessage %q: %v", text, err)
	}
	task, ok := res.(*a2ago.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want a task", res)
	}
	return task
}

func TestSendMessageBlockingReturnsTheAnswer(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "hello door", false)
	if task.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("state %s (%q), want completed", task.Status.State, statusText(task))
	}
	if got := responseText(task); got != "echo: hello door" {
		t.Errorf("response artifact %q, want the embedded default script's echo", got)
	}
	want := map[string]any{"member": "solo", "trust": "trusted", "origin": "operator"}
	if diff := cmp.Diff(want, withoutUsage(t, task.Metadata)); diff != "" {
		t.Errorf("task.metadata.murmur (-want +got):\n%s", diff)
	}
	if task.ContextID == "" || task.ID == "" {
		t.Errorf("task ids not set: %+v", task)
	}
}

func TestSendMessageReturnImmediatelyThenGetTask(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "job one", true)
	if task.Status.State.Terminal() {
		t.Fatalf("returnImmediately answered a terminal task (%s) before the work was released", task.Status.State)
	}
	f.waitState(c, task.ID, a2ago.TaskStateWorking)
	f.release()
	done := f.waitState(c, task.ID, a2ago.TaskStateCompleted)
	if got := responseText(done); got != "done: job one" {
		t.Errorf("response %q", got)
	}

	zero, one := 0, 1
	got, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: task.ID, HistoryLength: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 0 {
		t.Errorf("historyLength 0 returned %d messages", len(got.History))
	}
	got, err = c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: task.ID, HistoryLength: &one})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 1 || got.History[0].Role != a2ago.MessageRoleAgent {
		t.Errorf("historyLength 1 returned %+v, want only the most recent (the agent's answer)", got.History)
	}
	got, err = c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 2 {
		t.Errorf("default history has %d messages, want the question and the answer", len(got.History))
	}
}

func TestScriptCapsuleFailureCarriesStderr(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	f.failGated()
	task := sendTask(t, c, "doomed", false)
	if task.Status.State != a2ago.TaskStateFailed {
		t.Fatalf("state %s, want failed", task.Status.State)
	}
	if got, want := statusText(task), "script sh exited with status 7: it broke: doomed"; got != want {
		t.Errorf("status message %q, want %q", got, want)
	}
}

func TestListTasksPaginatesAndFilters(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	c := f.client(testOperatorToken)
	var ids []a2ago.TaskID
	for i := range 5 {
		ids = append(ids, sendTask(t, c, fmt.Sprintf("task %d", i), false).ID)
	}
	var seen []a2ago.TaskID
	token := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination never ended")
		}
		res, err := c.ListTasks(context.Background(), &a2ago.ListTasksRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if res.TotalSize != 5 || res.PageSize != 2 {
			t.Errorf("totalSize %d pageSize %d, want 5 and 2", res.TotalSize, res.PageSize)
		}
		for _, task := range res.Tasks {
			seen = append(seen, task.ID)
			if len(task.Artifacts) != 0 {
				t.Errorf("artifacts listed without includeArtifacts")
			}
		}
		if token = res.NextPageToken; token == "" {
			break
		}
	}
	want := []a2ago.TaskID{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("pages walked (-want newest first +got):\n%s", diff)
	}
	res, err := c.ListTasks(context.Background(), &a2ago.ListTasksRequest{Status: a2ago.TaskStateCanceled})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tasks) != 0 || res.TotalSize != 0 {
		t.Errorf("status filter canceled listed %d tasks", len(res.Tasks))
	}
	res, err = c.ListTasks(context.Background(), &a2ago.ListTasksRequest{Status: a2ago.TaskStateCompleted, IncludeArtifacts: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalSize != 5 || len(res.Tasks) != 1 || responseText(res.Tasks[0]) != "echo: task 4" {
		t.Errorf("completed filter with artifacts: total %d, tasks %+v", res.TotalSize, res.Tasks)
	}
}

func TestCancelTask(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	ctx := context.Background()
	task := sendTask(t, c, "never finishes", true)
	f.waitState(c, task.ID, a2ago.TaskStateWorking)

	got, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2ago.TaskStateCanceled {
		t.Fatalf("CancelTask answered %s, want canceled", got.Status.State)
	}
	again, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("a second CancelTask must be idempotent: %v", err)
	}
	if again.Status.State != a2ago.TaskStateCanceled {
		t.Errorf("second cancel: %s", again.Status.State)
	}

	f.release()
	done := sendTask(t, c, "quick", false)
	if done.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("after a cancel the session did not run the next task: %s", done.Status.State)
	}
	_, err = c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: done.ID})
	if !errors.Is(err, a2ago.ErrTaskNotCancelable) {
		t.Errorf("cancel of a completed task: %v, want TaskNotCancelable (-32002)", err)
	}
}

func TestCancelQueuedTask(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript + "task_acceptance: queue\n"})
	c := f.client(testOperatorToken)
	first := sendTask(t, c, "first", true)
	second := sendTask(t, c, "second", true)
	if second.Status.State != a2ago.TaskStateSubmitted {
		t.Fatalf("queued task is %s, want submitted", second.Status.State)
	}
	got, err := c.CancelTask(context.Background(), &a2ago.CancelTaskRequest{ID: second.ID})
	if err != nil || got.Status.State != a2ago.TaskStateCanceled {
		t.Fatalf("cancel queued: %v %v", got, err)
	}
	f.release()
	f.waitState(c, first.ID, a2ago.TaskStateCompleted)
	if again := f.waitState(c, second.ID, a2ago.TaskStateCanceled); responseText(again) != "" {
		t.Error("a canceled queued task ran anyway")
	}
}

func TestUnknownAndTerminalTasks(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	c := f.client(testOperatorToken)
	ctx := context.Background()
	if _, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: "tsk_nope"}); !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("GetTask unknown: %v, want TaskNotFound (-32001)", err)
	}
	if _, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: "tsk_nope"}); !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("CancelTask unknown: %v, want TaskNotFound (-32001)", err)
	}
	done := sendTask(t, c, "once", false)
	msg := userMessage("twice")
	msg.TaskID = done.ID
	_, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg})
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) {
		t.Errorf("message to a completed task: %v, want UnsupportedOperation (-32004)", err)
	}
	msg.TaskID = "tsk_nope"
	if _, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg}); !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("message to an unknown task: %v, want TaskNotFound", err)
	}
}

func TestBusyRejects(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	first := sendTask(t, c, "first", true)
	second := sendTask(t, c, "second", false)
	if second.Status.State != a2ago.TaskStateRejected {
		t.Fatalf("second task is %s, want rejected", second.Status.State)
	}
	if got := statusText(second); got != "task rejected: capsule is busy" {
		t.Errorf("status message %q, want exactly %q", got, "task rejected: capsule is busy")
	}
	f.release()
	f.waitState(c, first.ID, a2ago.TaskStateCompleted)
	if third := sendTask(t, c, "third", false); third.Status.State != a2ago.TaskStateCompleted {
		t.Errorf("once free, the session rejected again: %s", third.Status.State)
	}
}

func TestQueueRunsInOrder(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript + "task_acceptance: queue\n"})
	c := f.client(testOperatorToken)
	var ids []a2ago.TaskID
	for i := range 3 {
		task := sendTask(t, c, fmt.Sprintf("job %d", i), true)
		if i > 0 && task.Status.State != a2ago.TaskStateSubmitted {
			t.Fatalf("queued task %d is %s, want submitted", i, task.Status.State)
		}
		ids = append(ids, task.ID)
	}
	f.waitState(c, ids[0], a2ago.TaskStateWorking)
	for _, id := range ids[1:] {
		if got, _ := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: id}); got.Status.State != a2ago.TaskStateSubmitted {
			t.Errorf("task %s is %s while the first runs, want submitted", id, got.Status.State)
		}
	}
	f.release()
	var ends []int64
	for i, id := range ids {
		done := f.waitState(c, id, a2ago.TaskStateCompleted)
		if got, want := responseText(done), fmt.Sprintf("done: job %d", i); got != want {
			t.Errorf("task %d answered %q, want %q", i, got, want)
		}
		ends = append(ends, done.Status.Timestamp.UnixNano())
	}
	for i := 1; i < len(ends); i++ {
		if ends[i] < ends[i-1] {
			t.Errorf("task %d ended before task %d: the queue is not FIFO", i, i-1)
		}
	}
}

func TestQueueIsBounded(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript + "task_acceptance: queue\nqueue_size: 1\n"})
	c := f.client(testOperatorToken)
	sendTask(t, c, "running", true)
	if q := sendTask(t, c, "queued", true); q.Status.State != a2ago.TaskStateSubmitted {
		t.Fatalf("first queued task %s", q.Status.State)
	}
	over := sendTask(t, c, "over", true)
	if over.Status.State != a2ago.TaskStateRejected || statusText(over) != "task rejected: capsule is busy" {
		t.Errorf("task beyond the queue bound: %s %q, want rejected busy", over.Status.State, statusText(over))
	}
}

func TestAgentToolCallToAnUngrantedToolIsRefused(t *testing.T) {
	script := `rules:
  - match: ''
    turns:
      - call: [{tool: delegate-task, input: {capsule: summarizer, task: '{{.task}}'}}]
      - say: '{{(index .results 0).status}}|{{(index .results 0).output}}'
`
	capsule := `name: agent
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
`
	f := startDoor(t, map[string]string{"murmur.yaml": capsule, "script.yaml": script})
	task := sendTask(t, f.client(testOperatorToken), "summarize this", false)
	if task.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("state %s: %s", task.Status.State, statusText(task))
	}
	want := "refused|delegate-task is not available in this session: it exists only when the capsule declares capabilities.spawn.allow, and this capsule does not."
	if got := responseText(task); got != want {
		t.Errorf("the model saw %q, want %q", got, want)
	}
}
