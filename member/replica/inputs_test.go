package replica

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// fakeInputs is the inputs half of fakeStore: forwarded inputs by task, and their outcomes.
type fakeInputs struct {
	mu       sync.Mutex
	next     int64
	open     map[a2a.TaskID][]store.Input
	outcomes map[int64]store.InputOutcome
}

func (f *fakeStore) Forward(ctx context.Context, id a2a.TaskID, msg []byte, now time.Time) (int64, error) {
	in := &f.inputs
	in.mu.Lock()
	defer in.mu.Unlock()
	if id == "nowhere" {
		return 0, nil
	}
	in.next++
	if in.outcomes == nil {
		in.outcomes = map[int64]store.InputOutcome{}
	}
	in.outcomes[in.next] = store.InputOutcome{State: a2a.TaskStateInputRequired}
	return in.next, nil
}
func (f *fakeStore) TakeInputs(ctx context.Context, id a2a.TaskID) ([]store.Input, error) {
	in := &f.inputs
	in.mu.Lock()
	defer in.mu.Unlock()
	got := in.open[id]
	delete(in.open, id)
	return got, nil
}
func (f *fakeStore) Answer(ctx context.Context, n int64, refusal string) error {
	in := &f.inputs
	in.mu.Lock()
	defer in.mu.Unlock()
	in.outcomes[n] = store.InputOutcome{Taken: true, Answered: true, Refusal: refusal, State: a2a.TaskStateWorking}
	return nil
}
func (f *fakeStore) Outcome(ctx context.Context, n int64) (store.InputOutcome, error) {
	in := &f.inputs
	in.mu.Lock()
	defer in.mu.Unlock()
	o, ok := in.outcomes[n]
	if !ok {
		return o, store.ErrNotFound
	}
	return o, nil
}

// outcome is input n's outcome in st.
func (f *fakeStore) outcome(n int64) store.InputOutcome {
	f.inputs.mu.Lock()
	defer f.inputs.mu.Unlock()
	return f.inputs.outcomes[n]
}

func (s *fakeSession) Asks(id a2a.TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asking[id] != nil
}
func (s *fakeSession) Asking() []a2a.TaskID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []a2a.TaskID
	for id := range s.asking {
		ids = append(ids, id)
	}
	return ids
}
func (s *fakeSession) Deliver(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.asking[id]
	if want == nil {
		return false, nil
	}
	if got := *msg.Parts[0].Text; got != *want {
		return true, errors.New("the message " + got + " neither approves nor denies")
	}
	delete(s.asking, id)
	s.delivered = append(s.delivered, id)
	return true, nil
}

// An input another replica forwarded to a task this replica's session waits on is taken and handed to
// its question, and its outcome recorded: taken, refused with the question's reason, or not waiting; a
// lost notice is covered by the poll.
func TestForwardedInputsAreDelivered(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice)}
	approve := "approve"
	sess := &fakeSession{asking: map[a2a.TaskID]*string{"waits": &approve}}
	st.inputs.open = map[a2a.TaskID][]store.Input{"waits": {
		{N: 1, Message: []byte(`{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"maybe"}]}`)},
		{N: 2, Message: []byte(`{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"approve"}]}`)},
		{N: 3, Message: []byte(`{"messageId":"m3","role":"ROLE_USER","parts":[{"text":"approve"}]}`)},
	}}
	st.inputs.outcomes = map[int64]store.InputOutcome{}
	start(t, st, sess, Config{Poll: time.Hour})
	st.notices <- store.Notice{ID: "other", Input: 9} // a task this session does not wait on: left alone
	st.notices <- store.Notice{ID: "waits", Input: 1}
	eventually(t, "three inputs answered", func() bool { return st.outcome(3).Answered })
	if o := st.outcome(1); o.Refusal != "the message maybe neither approves nor denies" {
		t.Errorf("input 1: %+v; want refused with the question's reason", o)
	}
	if o := st.outcome(2); o.Refusal != "" {
		t.Errorf("input 2: %+v; want taken", o)
	}
	if o := st.outcome(3); o.Refusal != store.NotWaiting {
		t.Errorf("input 3: %+v; want not waiting (input 2 resumed the task)", o)
	}

	// A lost notice: the poll takes the inputs of every task the session waits on.
	st2 := &fakeStore{notices: make(chan store.Notice)}
	sess2 := &fakeSession{asking: map[a2a.TaskID]*string{"waits": &approve}}
	st2.inputs.open = map[a2a.TaskID][]store.Input{"waits": {{N: 4, Message: []byte(`{"parts":[{"text":"approve"}]}`)}}}
	st2.inputs.outcomes = map[int64]store.InputOutcome{}
	start(t, st2, sess2, Config{Poll: 20 * time.Millisecond})
	eventually(t, "the input taken on the poll", func() bool { return st2.outcome(4).Answered })
}

// Forward waits for the outcome of what it forwarded: the owner's answer (woken by its notice), or
// nothing to wait for when no live replica waits on the task.
func TestForwardWaitsForTheOutcome(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice)}
	c := start(t, st, &fakeSession{}, Config{Poll: time.Hour})
	msg := &a2a.Message{Parts: []a2a.Part{a2a.TextPart("approve")}}
	if taken, refusal, err := c.Forward(t.Context(), "nowhere", msg); taken || refusal != "" || err != nil {
		t.Errorf("Forward to a task waiting nowhere = %v %q %v", taken, refusal, err)
	}
	type result struct {
		taken   bool
		refusal string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		taken, refusal, err := c.Forward(t.Context(), "waits", msg)
		done <- result{taken, refusal, err}
	}()
	eventually(t, "the input forwarded", func() bool { _, err := st.Outcome(t.Context(), 1); return err == nil })
	select {
	case r := <-done:
		t.Fatalf("Forward returned %+v before the owner answered", r)
	case <-time.After(50 * time.Millisecond):
	}
	st.Answer(t.Context(), 1, "")
	st.notices <- store.Notice{ID: "waits", Input: 1, Answered: true}
	select {
	case r := <-done:
		if !r.taken || r.refusal != "" || r.err != nil {
			t.Errorf("Forward = %+v; want taken", r)
		}
	case <-time.After(forwardPoll / 2):
		t.Fatal("Forward was not woken by the answer's notice")
	}
}

func (f *fakeStore) Release(ctx context.Context, ids []a2a.TaskID) ([]a2a.TaskID, error) {
	return ids, nil
}

// Idle: the fake runs nothing, so its places alone bound what it claims.
func (s *fakeSession) Idle() bool { return true }
