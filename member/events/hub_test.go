package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

func task(state a2a.TaskState, msg string, artifacts ...string) *a2a.Task {
	t := &a2a.Task{ID: "tsk_1", ContextID: "ctx_1", Status: a2a.TaskStatus{State: state,
		Timestamp: a2a.NewTimestamp(time.Unix(1, 0))}}
	if msg != "" {
		t.Status.Message = &a2a.Message{MessageID: "m", Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(msg)}}
	}
	for _, a := range artifacts {
		t.Artifacts = append(t.Artifacts, a2a.Artifact{ArtifactID: a, Name: a, Parts: []a2a.Part{a2a.TextPart(a)}})
	}
	return t
}

func loader(t *a2a.Task) func() ([]byte, error) {
	return func() ([]byte, error) { return json.Marshal(t) }
}

// kinds reads what is waiting on s without blocking: "status:<state>:<text>" or "artifact:<name>".
func kinds(t *testing.T, s *Subscription) []string {
	t.Helper()
	var out []string
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return append(out, "closed")
			}
			var r a2a.StreamResponse
			if err := json.Unmarshal(ev.Result, &r); err != nil {
				t.Fatal(err)
			}
			switch {
			case r.StatusUpdate != nil:
				text := ""
				if m := r.StatusUpdate.Status.Message; m != nil {
					text = m.Text()
				}
				out = append(out, fmt.Sprintf("status:%s:%s:final=%v", r.StatusUpdate.Status.State, text, ev.Final))
			case r.ArtifactUpdate != nil:
				out = append(out, "artifact:"+r.ArtifactUpdate.Artifact.Name)
			default:
				t.Fatalf("event %s is neither a status nor an artifact update", ev.Result)
			}
		default:
			return out
		}
	}
}

func TestSubscribersSeeTheSameEventsInOrder(t *testing.T) {
	h := New(Config{})
	var seen []Change
	h.Observe(func(c Change) { seen = append(seen, c) })
	stored := task(a2a.TaskStateSubmitted, "")
	snap, a, err := h.Subscribe("tsk_1", loader(stored))
	if err != nil {
		t.Fatal(err)
	}
	var got a2a.Task
	json.Unmarshal(snap, &got)
	if got.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("snapshot is %s, want the stored SUBMITTED", got.Status.State)
	}
	h.Publish(task(a2a.TaskStateWorking, ""))
	// The second subscriber comes late: its snapshot is the WORKING task, and it gets nothing twice.
	snap, b, err := h.Subscribe("tsk_1", func() ([]byte, error) { t.Fatal("a watched task is not loaded again"); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(snap, &got)
	if got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("late snapshot is %s, want WORKING", got.Status.State)
	}
	h.Progress("tsk_1", "tool expr: running", nil)
	h.Publish(task(a2a.TaskStateWorking, "")) // the same status again: no event
	h.Publish(task(a2a.TaskStateCompleted, "done", "response"))
	h.Publish(task(a2a.TaskStateCompleted, "done", "response")) // after the end: nobody is told twice

	wantA := []string{"status:TASK_STATE_WORKING::final=false", "status:TASK_STATE_WORKING:tool expr: running:final=false",
		"artifact:response", "status:TASK_STATE_COMPLETED:done:final=true", "closed"}
	if got := kinds(t, a); fmt.Sprint(got) != fmt.Sprint(wantA) {
		t.Errorf("first subscriber got %v\nwant %v", got, wantA)
	}
	if got := kinds(t, b); fmt.Sprint(got) != fmt.Sprint(wantA[1:]) {
		t.Errorf("late subscriber got %v\nwant %v", got, wantA[1:])
	}
	if a.Err() != nil || b.Err() != nil {
		t.Errorf("a stream that reached the end has errors %v, %v", a.Err(), b.Err())
	}
	if n := h.Subscribers("tsk_1"); n != 0 {
		t.Errorf("%d subscribers left after the end", n)
	}
	if len(seen) != 4 || seen[3].State != a2a.TaskStateCompleted {
		t.Errorf("observers saw %v, want every one of the 4 publishes", seen)
	}
}

func TestTerminalTaskSubscriptionIsClosed(t *testing.T) {
	h := New(Config{})
	snap, s, err := h.Subscribe("tsk_1", loader(task(a2a.TaskStateFailed, "broke")))
	if err != nil || snap == nil {
		t.Fatal(snap, err)
	}
	if got := kinds(t, s); fmt.Sprint(got) != "[closed]" {
		t.Errorf("got %v, want a closed subscription", got)
	}
	wantErr := errors.New("not in the store")
	if _, _, err := h.Subscribe("tsk_2", func() ([]byte, error) { return nil, wantErr }); err != wantErr {
		t.Errorf("load error %v, want it returned as it is", err)
	}
}

func TestSlowSubscriberIsDroppedAndNeverBlocks(t *testing.T) {
	drops := 0
	h := New(Config{Buffer: 4, Dropped: func() { drops++ }})
	_, slow, _ := h.Subscribe("tsk_1", loader(task(a2a.TaskStateWorking, "")))
	_, fast, _ := h.Subscribe("tsk_1", loader(nil))
	var fastGot int
	for i := range 100 {
		h.Progress("tsk_1", fmt.Sprint("step ", i), nil) // returns although slow never reads
		fastGot += len(kinds(t, fast))
	}
	if fastGot != 100 {
		t.Errorf("the reading subscriber got %d of 100 events", fastGot)
	}
	got := kinds(t, slow)
	if len(got) != 5 || got[4] != "closed" {
		t.Fatalf("slow subscriber got %v, want its 4 buffered events and then the close", got)
	}
	if !errors.Is(slow.Err(), ErrSlowSubscriber) {
		t.Errorf("slow subscriber's error is %v, want ErrSlowSubscriber", slow.Err())
	}
	if drops != 1 || h.Subscribers("tsk_1") != 1 {
		t.Errorf("drops %d, subscribers %d; want 1 and 1", drops, h.Subscribers("tsk_1"))
	}
	fast.Close()
	fast.Close()
	if h.Subscribers("tsk_1") != 0 {
		t.Error("Close left the subscriber on its topic")
	}
	h.Progress("tsk_1", "nobody watches", nil) // no topic: nothing happens
}

func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprint(n, "subscribers"), func(b *testing.B) {
			h := New(Config{Buffer: 1 << 16})
			subs := make([]*Subscription, n)
			for i := range subs {
				_, subs[i], _ = h.Subscribe("tsk_1", loader(task(a2a.TaskStateWorking, "")))
			}
			done := make(chan int)
			for _, s := range subs {
				go func() {
					k := 0
					for range s.Events() {
						k++
					}
					done <- k
				}()
			}
			b.ResetTimer()
			for i := range b.N {
				h.Progress("tsk_1", "step", map[string]any{"i": i})
			}
			h.Publish(task(a2a.TaskStateCompleted, "done"))
			for range subs {
				<-done
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// TestWants: a task is wanted while it has a subscriber or an observer wants it; an observer added with
// Observe wants every task, and one added with ObserveTasks is still told of every change.
func TestWants(t *testing.T) {
	h := New(Config{})
	if h.Wants("tsk_1") {
		t.Error("a hub with nobody wants a task")
	}
	var told []a2a.TaskID
	h.ObserveTasks(func(c Change) { told = append(told, c.TaskID) }, func(id a2a.TaskID) bool { return id == "tsk_2" })
	if h.Wants("tsk_1") || !h.Wants("tsk_2") {
		t.Errorf("Wants(tsk_1) = %v, Wants(tsk_2) = %v; want only the observer's task", h.Wants("tsk_1"), h.Wants("tsk_2"))
	}
	_, sub, err := h.Subscribe("tsk_1", loader(task(a2a.TaskStateSubmitted, "")))
	if err != nil {
		t.Fatal(err)
	}
	if !h.Wants("tsk_1") {
		t.Error("a task with a subscriber is not wanted")
	}
	sub.Close()
	if h.Wants("tsk_1") {
		t.Error("a task whose subscriber left is still wanted")
	}
	h.Publish(task(a2a.TaskStateWorking, ""))
	if len(told) != 1 {
		t.Errorf("the observer was told of %v, want the change it does not watch too", told)
	}
	h.Observe(func(Change) {})
	if !h.Wants("tsk_9") {
		t.Error("an observer of every task does not want one")
	}
}
