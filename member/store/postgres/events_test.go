package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// decodeEvent is one stored event as an A2A StreamResponse.
func decodeEvent(t *testing.T, ev store.Logged) a2a.StreamResponse {
	t.Helper()
	var r a2a.StreamResponse
	if err := json.Unmarshal(ev.Event, &r); err != nil {
		t.Fatalf("event %d is not a StreamResponse: %v\n%s", ev.Seq, err, ev.Event)
	}
	return r
}

// follow is Follow of task id after after, which must succeed.
func follow(t *testing.T, s *Store, id a2a.TaskID, after int64) store.Followed {
	t.Helper()
	f, err := s.Follow(t.Context(), id, after)
	if err != nil {
		t.Fatalf("Follow %s after %d: %v", id, after, err)
	}
	return f
}

// TestEvents: each change of a task writes its events, numbered from 1, in the transaction of the
// change, whoever writes it: an artifactUpdate per added artifact, then a statusUpdate when the status
// differs; a write that changes neither writes none; Note appends a progress event in the order of the
// writes around it, only for the task's owner and only while it has not ended; Follow reads the task and
// its events after a number in one snapshot.
func TestEvents(t *testing.T) {
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	ctx := t.Context()
	tk := task(1, "ctx_a", a2a.TaskStateSubmitted)
	if err := r1.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if f := follow(t, r2, tk.ID, 0); f.Seq != 0 || len(f.Events) != 0 || f.State != a2a.TaskStateSubmitted {
		t.Fatalf("a new task: seq %d, %d events, %s; want 0, none, submitted", f.Seq, len(f.Events), f.State)
	}

	tk.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: a2a.NewTimestamp(epoch.Add(time.Minute))}
	r1.UpdateSoon(tk)
	r1.Note(tk.ID, []byte(`{"statusUpdate":{"taskId":"tsk_0001","contextId":"ctx_a","status":{"state":"TASK_STATE_WORKING"}}}`))
	r2.Note(tk.ID, []byte(`{"statusUpdate":{"note":"not the owner's"}}`)) // r2 does not own the task: dropped
	if err := r2.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Update(ctx, tk); err != nil { // the same task again: no event
		t.Fatal(err)
	}
	tk.Artifacts = []a2a.Artifact{{ArtifactID: "a1", Name: "response", Parts: []a2a.Part{a2a.TextPart("one")}},
		{ArtifactID: "a2", Name: "more", Parts: []a2a.Part{a2a.TextPart("two")}}}
	tk.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: a2a.NewTimestamp(epoch.Add(2 * time.Minute))}
	if err := r1.Update(ctx, tk); err != nil {
		t.Fatal(err)
	}
	r1.Note(tk.ID, []byte(`{"statusUpdate":{"note":"after the end"}}`)) // the task ended: dropped
	if err := r1.Settle(ctx); err != nil {
		t.Fatal(err)
	}

	f := follow(t, r2, tk.ID, 0)
	if f.Seq != 5 || len(f.Events) != 5 || f.State != a2a.TaskStateCompleted {
		t.Fatalf("seq %d, %d events, %s; want 5, 5, completed: %v", f.Seq, len(f.Events), f.State, f.Events)
	}
	want := []string{"working", "progress", "artifact a1", "artifact a2", "completed"}
	for i, ev := range f.Events {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d is numbered %d", i+1, ev.Seq)
		}
		r := decodeEvent(t, ev)
		var got string
		switch {
		case r.ArtifactUpdate != nil:
			a := r.ArtifactUpdate
			if a.TaskID != tk.ID || a.ContextID != "ctx_a" || !a.LastChunk {
				t.Errorf("event %d: %+v", ev.Seq, a)
			}
			got = "artifact " + a.Artifact.ArtifactID
		case r.StatusUpdate != nil && r.StatusUpdate.Status.Message != nil:
			got = "other"
		case r.StatusUpdate != nil && ev.Seq == 2:
			got = "progress"
		case r.StatusUpdate != nil:
			su := r.StatusUpdate
			if su.TaskID != tk.ID || su.ContextID != "ctx_a" || su.Status.Timestamp == nil {
				t.Errorf("event %d: %+v", ev.Seq, su)
			}
			got = map[a2a.TaskState]string{a2a.TaskStateWorking: "working", a2a.TaskStateCompleted: "completed"}[su.Status.State]
		}
		if got != want[i] {
			t.Errorf("event %d = %s; want %s\n%s", ev.Seq, got, want[i], ev.Event)
		}
	}
	var stored a2a.Task
	if err := json.Unmarshal(f.Task, &stored); err != nil || stored.Status.State != a2a.TaskStateCompleted || len(stored.Artifacts) != 2 {
		t.Errorf("Follow's task = %s (%v)", f.Task, err)
	}
	if f := follow(t, r2, tk.ID, 3); len(f.Events) != 2 || f.Events[0].Seq != 4 {
		t.Errorf("after 3: %d events from %v; want 2 from 4", len(f.Events), f.Events)
	}
	if f := follow(t, r2, tk.ID, math.MaxInt64); len(f.Events) != 0 || f.Seq != 5 {
		t.Errorf("after the last: %d events, seq %d", len(f.Events), f.Seq)
	}
	if _, err := r2.Follow(ctx, "tsk_none", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Follow of an unknown task: %v; want not found", err)
	}
}

// TestEventsOfAnEnd: a task another replica ends (RequestCancel of an unclaimed task, Reap of a dead
// replica's) gets its terminal statusUpdate too, numbered after the owner's.
func TestEventsOfAnEnd(t *testing.T) {
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	ctx := t.Context()
	renew(t, r1, 10*time.Second)
	renew(t, r2, 10*time.Second)
	running := task(1, "ctx_a", a2a.TaskStateSubmitted)
	if err := r1.Create(ctx, running); err != nil {
		t.Fatal(err)
	}
	running.Status.State = a2a.TaskStateWorking
	if err := r1.Update(ctx, running); err != nil {
		t.Fatal(err)
	}
	queued := task(2, "ctx_a", a2a.TaskStateSubmitted)
	if ok, err := r2.Offer(ctx, queued, 4); err != nil || !ok {
		t.Fatalf("Offer = %v, %v", ok, err)
	}
	if _, ended, err := r2.RequestCancel(ctx, queued.ID, "canceled", clk.Now()); err != nil || !ended {
		t.Fatalf("RequestCancel = %v, %v", ended, err)
	}
	clk.Add(time.Minute)
	renew(t, r2, 10*time.Second)
	if ids, err := r2.Reap(ctx, clk.Now()); err != nil || len(ids) != 1 {
		t.Fatalf("Reap = %v, %v", ids, err)
	}
	for _, c := range []struct {
		id    a2a.TaskID
		seq   int64
		state a2a.TaskState
	}{{running.ID, 2, a2a.TaskStateFailed}, {queued.ID, 1, a2a.TaskStateCanceled}} {
		f := follow(t, r2, c.id, 0)
		if f.Seq != c.seq || len(f.Events) != int(c.seq) {
			t.Fatalf("%s: seq %d, %d events; want %d", c.id, f.Seq, len(f.Events), c.seq)
		}
		last := decodeEvent(t, f.Events[len(f.Events)-1])
		if last.StatusUpdate == nil || last.StatusUpdate.Status.State != c.state || last.StatusUpdate.Status.Message == nil {
			t.Errorf("%s's last event = %s; want a statusUpdate %s with its message", c.id, f.Events[len(f.Events)-1].Event, c.state)
		}
	}
}

// TestInputs: Forward stores a follow-up only for a task that waits for input at another live replica;
// its owner takes it once, answers it, and the forwarder reads the outcome; Watch tells both of it on
// murmur_inputs.
func TestInputs(t *testing.T) {
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	ctx := t.Context()
	renew(t, r1, time.Minute)
	renew(t, r2, time.Minute)
	tk := task(1, "ctx_a", a2a.TaskStateSubmitted)
	if err := r1.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if n, err := r2.Forward(ctx, tk.ID, []byte(`{"n":0}`), clk.Now()); n != 0 || err != nil {
		t.Fatalf("Forward to a task that does not wait = %d, %v; want 0", n, err)
	}
	tk.Status.State = a2a.TaskStateInputRequired
	if err := r1.Update(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if n, err := r1.Forward(ctx, tk.ID, []byte(`{"n":0}`), clk.Now()); n != 0 || err != nil {
		t.Fatalf("Forward by the owner itself = %d, %v; want 0", n, err)
	}
	notices := make(chan store.Notice, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r1.Watch(wctx, func(n store.Notice) { notices <- n }) }()
	defer func() { stop(); <-done }()
	time.Sleep(200 * time.Millisecond) // listening
	n1, err := r2.Forward(ctx, tk.ID, []byte(`{"n":1}`), clk.Now())
	if err != nil || n1 == 0 {
		t.Fatalf("Forward = %d, %v", n1, err)
	}
	n2, _ := r2.Forward(ctx, tk.ID, []byte(`{"n":2}`), clk.Now())
	waitNotice := func(want store.Notice) {
		t.Helper()
		for {
			select {
			case n := <-notices:
				if n == want {
					return
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no notice %+v", want)
			}
		}
	}
	waitNotice(store.Notice{ID: tk.ID, Input: n1})
	if in, err := r2.TakeInputs(ctx, tk.ID); len(in) != 0 || err != nil {
		t.Errorf("TakeInputs by a replica that does not own the task = %v, %v", in, err)
	}
	in, err := r1.TakeInputs(ctx, tk.ID)
	if err != nil || len(in) != 2 || in[0].N != n1 || in[1].N != n2 || string(in[1].Message) != `{"n": 2}` && string(in[1].Message) != `{"n":2}` {
		t.Fatalf("TakeInputs = %+v, %v", in, err)
	}
	if again, _ := r1.TakeInputs(ctx, tk.ID); len(again) != 0 {
		t.Errorf("inputs taken twice: %+v", again)
	}
	if o, err := r2.Outcome(ctx, n1); err != nil || !o.Taken || o.Answered || o.State != a2a.TaskStateInputRequired {
		t.Errorf("Outcome once taken = %+v, %v", o, err)
	}
	if err := r1.Answer(ctx, n1, "no such answer"); err != nil {
		t.Fatal(err)
	}
	waitNotice(store.Notice{ID: tk.ID, Input: n1, Answered: true})
	if o, _ := r2.Outcome(ctx, n1); !o.Answered || o.Refusal != "no such answer" {
		t.Errorf("Outcome once answered = %+v", o)
	}
	clk.Add(2 * time.Minute) // r1's lease lapses: nothing more is forwarded to it
	if n, err := r2.Forward(ctx, tk.ID, []byte(`{"n":3}`), clk.Now()); n != 0 || err != nil {
		t.Errorf("Forward to a dead owner = %d, %v; want 0", n, err)
	}
}

func TestParseInputNotice(t *testing.T) {
	for _, tt := range []struct {
		payload string
		want    store.Notice
		ok      bool
	}{
		{"12 0 tsk_1", store.Notice{ID: "tsk_1", Input: 12}, true},
		{"3 1 a b", store.Notice{ID: "a b", Input: 3, Answered: true}, true},
		{"x 1 tsk_1", store.Notice{}, false},
		{"3 2 tsk_1", store.Notice{}, false},
		{"3 1", store.Notice{}, false},
	} {
		if got, ok := parseInputNotice(tt.payload); got != tt.want || ok != tt.ok {
			t.Errorf("parseInputNotice(%q) = %+v, %v; want %+v, %v", tt.payload, got, ok, tt.want, tt.ok)
		}
	}
}

// TestOneTaskPerMessage: copies of one caller's message created at once by two replicas store one task;
// the other Create fails with store.ErrSentBefore, and GetByMessage finds the stored one. A rejection
// does not count.
func TestOneTaskPerMessage(t *testing.T) {
	clk := newClock(epoch)
	r1, dsn := open(t, clk.cfg("r1"))
	r2, _ := open(t, clk.cfg("r2"), dsn)
	ctx := t.Context()
	for round := range 10 {
		msg := a2a.MessageID(fmt.Sprintf("msg_race_%d", round))
		a, b := task(100+2*round, "ctx_a", a2a.TaskStateSubmitted), task(101+2*round, "ctx_a", a2a.TaskStateSubmitted)
		a.History[0].MessageID, b.History[0].MessageID = msg, msg
		errs := make(chan error, 2)
		go func() { errs <- r1.Create(ctx, a) }()
		go func() { errs <- r2.Create(ctx, b) }()
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), store.ErrSentBefore) {
			t.Fatalf("round %d: two copies created at once: %v and %v; want one stored and one ErrSentBefore", round, e1, e2)
		}
		if got, err := r1.GetByMessage(ctx, "", string(msg)); err != nil || (got.ID != a.ID && got.ID != b.ID) {
			t.Errorf("round %d: GetByMessage = %v, %v", round, got, err)
		}
	}
	rejected := task(200, "ctx_a", a2a.TaskStateRejected)
	rejected.History[0].MessageID = "msg_again"
	again := task(201, "ctx_a", a2a.TaskStateSubmitted)
	again.History[0].MessageID = "msg_again"
	if err := r1.Create(ctx, rejected); err != nil {
		t.Fatal(err)
	}
	if err := r2.Create(ctx, again); err != nil {
		t.Errorf("a message sent again after its rejection: %v; want it stored", err)
	}
}
