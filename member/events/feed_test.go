package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// memLog is an EventLog in memory: one task's JSON and events, changed by the test as a shared store
// would be by another replica.
type memLog struct {
	mu     sync.Mutex
	state  a2a.TaskState
	events []json.RawMessage
	notes  []json.RawMessage
	reads  int
}

func (l *memLog) Follow(_ context.Context, id a2a.TaskID, after int64) (store.Followed, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	if id != "tsk_1" {
		return store.Followed{}, fmt.Errorf("task %s: %w", id, store.ErrNotFound)
	}
	f := store.Followed{Task: json.RawMessage(fmt.Sprintf(`{"id":"tsk_1","status":{"state":%q},"n":%d}`, l.state, len(l.events))),
		State: l.state, Seq: int64(len(l.events))}
	for i := max(after, 0); i < int64(len(l.events)); i++ {
		f.Events = append(f.Events, store.Logged{Seq: i + 1, Event: l.events[i]})
	}
	return f, nil
}

func (l *memLog) Note(_ a2a.TaskID, ev []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, ev)
}

// add commits events n and moves the task to state.
func (l *memLog) add(state a2a.TaskState, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		l.events = append(l.events, json.RawMessage(fmt.Sprintf(`{"statusUpdate":{"n":%d}}`, len(l.events)+1)))
	}
	l.state = state
}

// take reads n events from s, failing after a second without one.
func take(t *testing.T, s *Subscription, n int) []Event {
	t.Helper()
	var got []Event
	for range n {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("the subscription closed after %d events (%v); want %d", len(got), s.Err(), n)
			}
			got = append(got, ev)
		case <-time.After(time.Second):
			t.Fatalf("%d events in a second; want %d", len(got), n)
		}
	}
	return got
}

func checkSeqs(t *testing.T, evs []Event, from int64) {
	t.Helper()
	for i, ev := range evs {
		want := from + int64(i)
		if ev.Seq != want || string(ev.Result) != fmt.Sprintf(`{"statusUpdate":{"n":%d}}`, want) {
			t.Errorf("event %d = %d %s; want %d", i, ev.Seq, ev.Result, want)
		}
	}
}

// TestFeedSendsEachEventOnce: subscribers that join at different points each get the task as the store
// has it and then every later event exactly once, in order, however many pokes come; the last event of
// an ended task is Final and closes them.
func TestFeedSendsEachEventOnce(t *testing.T) {
	log := &memLog{}
	log.add(a2a.TaskStateWorking, 2)
	f := NewFeed(New(Config{}), log, nil)
	defer f.Close()

	snap, a, err := f.Subscribe("tsk_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Start() != 2 || string(snap) != `{"id":"tsk_1","status":{"state":"TASK_STATE_WORKING"},"n":2}` {
		t.Fatalf("first answer %s at %d", snap, a.Start())
	}
	log.add(a2a.TaskStateWorking, 3)
	f.Poke("tsk_1")
	f.Poke("tsk_1")
	checkSeqs(t, take(t, a, 3), 3)

	// b joins the topic a keeps: it starts where the topic is, and shares its reads.
	snap, b, err := f.Subscribe("tsk_1", nil)
	if err != nil || b.Start() != 5 || string(snap) != `{"id":"tsk_1","status":{"state":"TASK_STATE_WORKING"},"n":5}` {
		t.Fatalf("second subscriber: %s at %d, %v", snap, b.Start(), err)
	}
	log.add(a2a.TaskStateWorking, 1)
	f.PokeAll()
	checkSeqs(t, take(t, a, 1), 6)
	checkSeqs(t, take(t, b, 1), 6)

	// c comes back after event 2: it gets 3 to 6 from the store, then what all get.
	c, err := f.Resume(context.Background(), "tsk_1", 2)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, take(t, c, 4), 3)
	log.add(a2a.TaskStateCompleted, 2)
	f.Tell(store.Notice{ID: "tsk_1"})
	for _, s := range []*Subscription{a, b, c} {
		evs := take(t, s, 2)
		checkSeqs(t, evs, 7)
		if evs[0].Final || !evs[1].Final {
			t.Errorf("Final = %v, %v; want the last only", evs[0].Final, evs[1].Final)
		}
		if _, ok := <-s.Events(); ok {
			t.Error("an event after the task's last")
		}
	}
	if n := f.Subscribers("tsk_1"); n != 0 {
		t.Errorf("%d subscribers left", n)
	}
	// An ended task: its first answer, and nothing after; a client that had every event gets nothing.
	snap, d, err := f.Subscribe("tsk_1", nil)
	if err != nil || d.Start() != 8 || len(snap) == 0 {
		t.Fatalf("after the end: %s at %d, %v", snap, d.Start(), err)
	}
	if _, ok := <-d.Events(); ok {
		t.Error("an ended task's subscription carries an event")
	}
	e, err := f.Resume(context.Background(), "tsk_1", 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-e.Events(); ok {
		t.Error("a resume after the last event carries one")
	}
	if _, _, err := f.Subscribe("tsk_none", nil); err == nil {
		t.Error("subscribing to an unknown task succeeded")
	}
}

// TestFeedProgressIsNoted: progress of a task this replica published unended is kept in the store's
// events as a working statusUpdate with the text; of an ended or unknown task, nothing.
func TestFeedProgressIsNoted(t *testing.T) {
	log := &memLog{}
	f := NewFeed(New(Config{}), log, nil)
	defer f.Close()
	f.Progress("tsk_1", "tool ls: running", nil) // not published: unknown here
	f.Publish(&a2a.Task{ID: "tsk_1", ContextID: "ctx_1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}})
	f.Progress("tsk_1", "tool ls: running", map[string]any{"k": "v"})
	f.Publish(&a2a.Task{ID: "tsk_1", ContextID: "ctx_1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
	f.Progress("tsk_1", "tool ls: ok", nil)
	if len(log.notes) != 1 {
		t.Fatalf("%d notes; want 1: %s", len(log.notes), log.notes)
	}
	var r a2a.StreamResponse
	if err := json.Unmarshal(log.notes[0], &r); err != nil || r.StatusUpdate == nil {
		t.Fatalf("note %s: %v", log.notes[0], err)
	}
	su := r.StatusUpdate
	if su.TaskID != "tsk_1" || su.ContextID != "ctx_1" || su.Status.State != a2a.TaskStateWorking || su.Status.Message == nil ||
		*su.Status.Message.Parts[0].Text != "tool ls: running" || su.Status.Message.Metadata["k"] != "v" {
		t.Errorf("note = %s", log.notes[0])
	}
}

// TestFeedDropsASlowSubscriber: a subscriber whose buffer is full is ended with ErrSlowSubscriber, and
// the others still get every event.
func TestFeedDropsASlowSubscriber(t *testing.T) {
	log := &memLog{}
	log.add(a2a.TaskStateWorking, 1)
	var dropped atomic.Int32
	f := NewFeed(New(Config{Buffer: 2, Dropped: func() { dropped.Add(1) }}), log, nil)
	defer f.Close()
	_, slow, _ := f.Subscribe("tsk_1", nil)
	_, fast, _ := f.Subscribe("tsk_1", nil)
	for range 2 {
		log.add(a2a.TaskStateWorking, 1)
		f.Poke("tsk_1")
		checkSeqs(t, take(t, fast, 1), log.seq())
	}
	log.add(a2a.TaskStateWorking, 1)
	f.Poke("tsk_1")
	checkSeqs(t, take(t, fast, 1), 4)
	take(t, slow, 2)
	if _, ok := <-slow.Events(); ok || slow.Err() != ErrSlowSubscriber {
		t.Errorf("the slow subscriber: open %v, err %v", ok, slow.Err())
	}
	// Dropped is told outside the feed's lock, once the reader that dropped it has sent what it read.
	for deadline := time.Now().Add(time.Second); dropped.Load() == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
	}
	if n := dropped.Load(); n != 1 {
		t.Errorf("Dropped told %d times", n)
	}
}

func (l *memLog) seq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.events))
}
