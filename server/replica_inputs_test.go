package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
)

// notOwner is the index of a replica of rs that does not run task id.
func notOwner(t *testing.T, rs *replicaSet, id a2ago.TaskID) int {
	t.Helper()
	owner := rs.owners()[id]
	for i, f := range rs.fs {
		if f.Members[0].Replica != owner {
			return i
		}
	}
	t.Fatalf("every replica runs task %s", id)
	return 0
}

// A task waiting for its sender's input runs at one replica; its sender's follow-up may reach any other:
// the answer to an ask: turn resumes it there, and a blocking SendMessage at the other replica returns
// the completed task.
func TestReplicaFollowUpAtAnotherReplica(t *testing.T) {
	rs := startReplicaFiles(t, 2, 2*time.Second, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - ask: 'Which currency?'\n      - say: 'converted to {{.message}}'\n",
	})
	task := sendTask(t, rs.clients[0], "convert 12 dollars", true)
	waitState(t, rs.clients[0], task.ID, a2ago.TaskStateInputRequired)
	other := notOwner(t, rs, task.ID)
	done := send(t, rs.clients[other], followUp(task.ID, a2ago.NewTextPart("euros")))
	if done.Status.State != a2ago.TaskStateCompleted || responseText(done) != "converted to euros" {
		t.Errorf("the follow-up at replica %s: task %s, answer %q; want converted to euros", rs.fs[other].Members[0].Replica, done.Status.State, responseText(done))
	}
}

// An approval asked by a hook at one replica is answered at another: a reply that neither approves nor
// denies is refused there with the question's own reason and the task keeps waiting; "approve" runs
// the tool; a follow-up to a task that waits nowhere any more gets A2A's error for its state.
func TestReplicaApprovalAtAnotherReplica(t *testing.T) {
	rs := startReplicaFiles(t, 2, 2*time.Second, approvalFiles(""))
	ctx := context.Background()
	task := sendTask(t, rs.clients[0], "check", true)
	waitState(t, rs.clients[0], task.ID, a2ago.TaskStateInputRequired)
	other := notOwner(t, rs, task.ID)
	c := rs.clients[other]
	// The other replica reads the task from the database, which the owner's own view can be ahead of.
	waitState(t, c, task.ID, a2ago.TaskStateInputRequired)
	_, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(task.ID, a2ago.NewTextPart("maybe later"))})
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), `the message "maybe later" neither approves nor denies`) {
		t.Errorf("a reply that does not answer, at another replica: %v; want invalid params with the reason", err)
	}
	waitState(t, c, task.ID, a2ago.TaskStateInputRequired)
	done := send(t, c, followUp(task.ID, a2ago.NewTextPart("approve")))
	if done.Status.State != a2ago.TaskStateCompleted || !strings.HasPrefix(responseText(done), "ok: {") {
		t.Errorf("approved at another replica: %s %q; want completed with the tool's output", done.Status.State, responseText(done))
	}
	_, err = c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(task.ID, a2ago.NewTextPart("approve"))})
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) {
		t.Errorf("an approval for a completed task at another replica: %v", err)
	}
}

// A task in an existing context that its replica is too busy for runs at another replica with the
// context's conversation: the replica that adopts it reads the earlier tasks as the one it was sent to
// would have.
func TestReplicaAdoptedTaskKeepsItsContext(t *testing.T) {
	rs := startReplicaFiles(t, 2, 2*time.Second, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n" +
			"  - match: '^hold$'\n    turns:\n      - ask: 'Hold on?'\n      - say: 'released'\n" +
			"  - match: '^price of (?P<what>\\w+)$'\n    turns:\n      - say: '{{.what}} costs 12 dollars'\n" +
			"  - match: ''\n    turns:\n      - say: 'I was told: {{.transcript}}'\n",
	})
	held := sendTask(t, rs.clients[0], "hold", true) // r1's one place, waiting for input
	waitState(t, rs.clients[0], held.ID, a2ago.TaskStateInputRequired)
	defer rs.clients[0].CancelTask(context.Background(), &a2ago.CancelTaskRequest{ID: held.ID})
	first := send(t, rs.clients[1], userMessage("price of tea"))
	second := send(t, rs.clients[0], inContext(first.ContextID, "and in euros?"))
	if owner := rs.owners()[second.ID]; owner != rs.fs[1].Members[0].Replica {
		t.Fatalf("the second task ran at %q; want the replica that was free", owner)
	}
	got := responseText(second)
	for _, want := range []string{"user:\nprice of tea", "assistant:\ntea costs 12 dollars", "user:\nand in euros?"} {
		if !strings.Contains(got, want) {
			t.Errorf("the adopted task's conversation lacks %q:\n%s", want, got)
		}
	}
}

// A replica that stops gracefully gives its queued tasks to the others instead of canceling them: they
// run and complete at a live replica. A blocking SendMessage waiting at the stopping replica returns the
// task as it stands, for its sender to follow anywhere: one it queued, and one another replica will run.
// The task it was running ends canceled, as a member of one process's does.
func TestStoppingReplicaReleasesItsQueue(t *testing.T) {
	// Two replicas of one task and a queue of one: room for four tasks.
	rs := startReplicaFiles(t, 2, 2*time.Second, map[string]string{"murmur.yaml": gatedScript + "task_acceptance: queue\nqueue_size: 1\n"})
	atR2 := sendTask(t, rs.clients[1], "running at r2", true)
	running := sendTask(t, rs.clients[0], "running at r1", true)
	waitState(t, rs.clients[0], running.ID, a2ago.TaskStateWorking)
	waitState(t, rs.clients[0], atR2.ID, a2ago.TaskStateWorking)
	type answer struct {
		task *a2ago.Task
		err  error
	}
	blocked := make(chan answer, 2)
	block := func(text string) {
		res, err := rs.clients[0].SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage(text)})
		t, _ := res.(*a2ago.Task)
		blocked <- answer{t, err}
	}
	storedBy := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); len(rs.owners()) < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("task %d was never stored", n)
			}
		}
	}
	// r1 is busy, and r2 too: the first task it cannot run is offered (unclaimed), as is the second; the
	// member is then full, and the third waits in r1's own queue.
	go block("offered and waited on")
	storedBy(3)
	offered := sendTask(t, rs.clients[0], "offered", true)
	go block("queued at r1 and waited on")
	storedBy(5)
	owners := rs.owners()
	var queued a2ago.TaskID
	for id, owner := range owners {
		if owner == "r1" && id != running.ID {
			queued = id
		}
	}
	if owners[offered.ID] != "" || queued == "" {
		t.Fatalf("owners before r1 stops: %v; want two unclaimed and one queued at r1", owners)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rs.fs[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rs.fs = rs.fs[1:] // shut down already
	var waited []*a2ago.Task
	for range 2 {
		select {
		case a := <-blocked:
			if a.err != nil || a.task == nil || a.task.Status.State.Terminal() {
				t.Fatalf("a blocking SendMessage at the stopping replica: %+v, %v; want its task, not ended", a.task, a.err)
			}
			waited = append(waited, a.task)
		case <-time.After(10 * time.Second):
			t.Fatal("a blocking SendMessage at the stopping replica never returned")
		}
	}
	if owner := rs.owners()[queued]; owner != "" && owner != "r2" {
		t.Errorf("r1's queued task belongs to %q after r1 stopped; want it released", owner)
	}
	r2 := rs.clients[1]
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	waitState(t, r2, running.ID, a2ago.TaskStateCanceled)
	for _, id := range []a2ago.TaskID{atR2.ID, offered.ID, queued, waited[0].ID, waited[1].ID} {
		done := waitState(t, r2, id, a2ago.TaskStateCompleted)
		if owner := rs.owners()[id]; owner != "r2" {
			t.Errorf("task %s completed at %q; want r2", id, owner)
		}
		if !strings.HasPrefix(responseText(done), "done: ") {
			t.Errorf("task %s answers %q", id, responseText(done))
		}
	}
}
