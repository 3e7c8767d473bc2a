package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
)

// A task waits in the queue until it is stored; Next takes the stored head, in order of admission;
// what Cancel, Close and a failed Create take out leaves the queue in order.
func TestQueueOrderAndStoring(t *testing.T) {
	q := New()
	at := time.Unix(100, 0)
	for _, id := range []a2a.TaskID{"a", "b", "c"} {
		q.Hold(id, at)
		q.Add(id, id == "b", false)
	}
	if _, _, ok := q.Next(context.Background()); ok {
		t.Fatal("Next took a task that is still being stored")
	}
	if q.Dequeue("a") {
		t.Error("Dequeue took a task that is still being stored")
	}
	if !q.Stored("a") || !q.Stored("b") {
		t.Fatal("a stored task is not queued")
	}
	if diff := cmp.Diff([]a2a.TaskID{"a", "b"}, q.Queued()); diff != "" {
		t.Errorf("Queued (-want +got):\n%s", diff)
	}
	if !q.Continues("b") || q.Continues("a") {
		t.Error("Continues does not say which task was sent into an existing context")
	}
	q.Drop("c") // its Create failed
	if q.Holds("c") || q.Stored("c") {
		t.Error("a dropped task is still held or queued")
	}
	ctx, r, ok := q.Next(context.Background())
	if !ok || r.ID != "a" || q.Running() != r {
		t.Fatalf("Next = %v %v; want a, running", r, ok)
	}
	if q.Idle() || q.Quiet() {
		t.Error("a session with a running task is idle or quiet")
	}
	if !q.Dequeue("b") || len(q.Queued()) != 0 {
		t.Error("Dequeue did not take b out of the queue")
	}
	if got := q.Cancel("a"); got != r || !r.Canceled || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("Cancel of the running task = %v, canceled %v, cause %v", got, r.Canceled, context.Cause(ctx))
	}
	q.Hand(r, true)
	if q.Running() != nil || q.Handed("a") != r || q.Cancel("a") != r || q.Quiet() {
		t.Error("a task whose end was handed over is not ending")
	}
	if got, held := q.Forget("a"); !held || !got.Equal(at) {
		t.Errorf("Forget = %v %v; want when it arrived", got, held)
	}
	q.Settled("a")
	if !q.Idle() || !q.Quiet() || q.Handed("a") != nil || q.Cancel("a") != nil {
		t.Error("a session whose tasks all settled is not idle and quiet")
	}
}

// Clear empties the queue; a task being stored learns it when it is stored.
func TestClearWhileStoring(t *testing.T) {
	q := New()
	q.Hold("a", time.Now())
	q.Add("a", false, false)
	q.Clear()
	if q.Stored("a") {
		t.Error("a task stored after Clear is still queued")
	}
	if !q.Holds("a") {
		t.Error("Clear forgot a held task: its end is still to be settled")
	}
}
