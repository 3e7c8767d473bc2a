package replica

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is the replica half of a shared store, in memory: unclaimed tasks to claim, a lease that
// can be taken away, cancellations, and notices a test sends. Its Tasks half is absent (nil).
type fakeStore struct {
	store.Tasks
	mu        sync.Mutex
	unclaimed []*a2a.Task
	reaped    bool         // Renew answers held=false
	renewErr  error        // Renew fails
	reap      []a2a.TaskID // what the next Reap ends
	notices   chan store.Notice
	canceled  map[a2a.TaskID]bool // RequestCancel ends these here
	renewals  int
	inputs    fakeInputs
}

func (f *fakeStore) Replica() string { return "r1" }
func (f *fakeStore) Renew(ctx context.Context, lease time.Duration, free int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewals++
	return !f.reaped, f.renewErr
}
func (f *fakeStore) Reap(ctx context.Context, now time.Time) ([]a2a.TaskID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := f.reap
	f.reap = nil
	return ids, nil
}
func (f *fakeStore) Claim(ctx context.Context, n int) ([]*a2a.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.unclaimed))
	ts := f.unclaimed[:n]
	f.unclaimed = f.unclaimed[n:]
	return ts, nil
}
func (f *fakeStore) Offer(ctx context.Context, t *a2a.Task, per int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unclaimed = append(f.unclaimed, t)
	return true, nil
}
func (f *fakeStore) RequestCancel(ctx context.Context, id a2a.TaskID, text string, now time.Time) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "r2", f.canceled[id], nil
}
func (f *fakeStore) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	return &a2a.Task{ID: id, Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}}, nil
}
func (f *fakeStore) Watch(ctx context.Context, fn func(store.Notice)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case n := <-f.notices:
			fn(n)
		}
	}
}
func (f *fakeStore) Replicas(ctx context.Context) ([]store.ReplicaInfo, error) { return nil, nil }

// fakeSession has places, adopts what it is given, and records what it is told.
type fakeSession struct {
	mu       sync.Mutex
	free     int
	adopted  []a2a.TaskID
	remote   []a2a.TaskID
	canceled []a2a.TaskID
	resyncs  int
	// asking: the tasks that wait for input, with the one text that answers each
	asking    map[a2a.TaskID]*string
	delivered []a2a.TaskID
}

func (s *fakeSession) Adopt(ctx context.Context, claim func(context.Context) (*a2a.Task, error)) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 {
		return false, nil
	}
	t, err := claim(ctx)
	if t == nil || err != nil {
		return false, err
	}
	s.free--
	s.adopted = append(s.adopted, t.ID)
	return true, nil
}
func (s *fakeSession) Free() int { s.mu.Lock(); defer s.mu.Unlock(); return s.free }
func (s *fakeSession) Remote(ctx context.Context, id a2a.TaskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remote = append(s.remote, id)
}
func (s *fakeSession) Cancel(ctx context.Context, id a2a.TaskID, sc store.Scope) (*a2a.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.canceled = append(s.canceled, id)
	return nil, nil
}
func (s *fakeSession) Resync() { s.mu.Lock(); defer s.mu.Unlock(); s.resyncs++ }

func (s *fakeSession) snapshot() (adopted, remote, canceled []a2a.TaskID, resyncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]a2a.TaskID(nil), s.adopted...), append([]a2a.TaskID(nil), s.remote...), append([]a2a.TaskID(nil), s.canceled...), s.resyncs
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("not within 10s: %s", what)
}

func start(t *testing.T, st *fakeStore, sess *fakeSession, cfg Config) *Coordinator {
	t.Helper()
	cfg.Store = st
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	c := New(cfg)
	if err := c.Start(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func task(id string) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
}

// The session adopts unclaimed tasks while it has places, and no more; an offer wakes the claimer.
func TestClaimsWhileThereArePlaces(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice), unclaimed: []*a2a.Task{task("a"), task("b"), task("c")}}
	sess := &fakeSession{free: 2}
	c := start(t, st, sess, Config{Poll: time.Hour}) // only the start and the wakes claim
	eventually(t, "two tasks adopted", func() bool { a, _, _, _ := sess.snapshot(); return len(a) == 2 })
	time.Sleep(50 * time.Millisecond)
	if a, _, _, _ := sess.snapshot(); len(a) != 2 || a[0] != "a" || a[1] != "b" {
		t.Fatalf("adopted %v with two places; want [a b]", a)
	}
	sess.mu.Lock()
	sess.free = 2
	sess.mu.Unlock()
	if ok, err := c.Offer(t.Context(), task("d"), 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	eventually(t, "c and d adopted after the offer", func() bool { a, _, _, _ := sess.snapshot(); return len(a) == 4 })
	if a, _, _, _ := sess.snapshot(); a[2] != "c" || a[3] != "d" {
		t.Errorf("adopted %v; want c then d after a and b", a)
	}
}

// A notice from the store: a cancellation asked of this replica is carried out once; another replica's
// change reaches the session; an unclaimed task wakes the claimer; a resync wakes the waiters.
func TestNotices(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice)}
	sess := &fakeSession{free: 1}
	start(t, st, sess, Config{Poll: time.Hour})
	send := func(n store.Notice) {
		select {
		case st.notices <- n:
		case <-time.After(10 * time.Second):
			t.Fatal("the coordinator does not take notices")
		}
	}
	send(store.Notice{ID: "mine", Owner: "r1", State: a2a.TaskStateWorking, Cancel: true})
	send(store.Notice{ID: "theirs", Owner: "r2", State: a2a.TaskStateWorking})
	send(store.Notice{ID: "mine-ended", Owner: "r1", State: a2a.TaskStateCanceled, Cancel: true}) // ended: nothing to cancel
	st.mu.Lock()
	st.unclaimed = []*a2a.Task{task("free")}
	st.mu.Unlock()
	send(store.Notice{ID: "free", Owner: "", State: a2a.TaskStateSubmitted})
	send(store.Notice{Resync: true})
	eventually(t, "every notice handled", func() bool {
		a, r, c, n := sess.snapshot()
		return len(a) == 1 && len(c) == 1 && n >= 1 && len(r) == 2
	})
	a, r, c, _ := sess.snapshot()
	if c[0] != "mine" || a[0] != "free" || r[0] != "theirs" || r[1] != "free" {
		t.Errorf("canceled %v, adopted %v, told %v", c, a, r)
	}
}

// Cancel of a task nobody runs (or whose replica is dead) ends it here and tells the session; of a task
// a live replica runs, it is left to that replica.
func TestCancel(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice), canceled: map[a2a.TaskID]bool{"orphan": true}}
	sess := &fakeSession{}
	c := start(t, st, sess, Config{Poll: time.Hour})
	got, done, err := c.Cancel(t.Context(), "orphan")
	if err != nil || !done || got.ID != "orphan" || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("Cancel of an orphan: %v %v %v", got, done, err)
	}
	if _, r, _, _ := sess.snapshot(); len(r) != 1 || r[0] != "orphan" {
		t.Errorf("the session was told %v; want the orphan's end", r)
	}
	if got, done, err := c.Cancel(t.Context(), "running-elsewhere"); err != nil || done || got != nil {
		t.Errorf("Cancel of another live replica's task: %v %v %v; want it left to that replica", got, done, err)
	}
}

// A lease the others reaped is lost, once; so is one that cannot be renewed for a whole lease.
func TestLeaseLost(t *testing.T) {
	for _, tt := range []struct {
		name   string
		break_ func(*fakeStore)
		want   string
	}{
		{"reaped", func(f *fakeStore) { f.reaped = true }, "took it for dead"},
		{"cannot renew", func(f *fakeStore) { f.renewErr = errors.New("database unreachable") }, "could not renew its lease"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{notices: make(chan store.Notice)}
			lost := make(chan error, 2)
			start(t, st, &fakeSession{}, Config{Lease: 90 * time.Millisecond, Lost: func(err error) { lost <- err }})
			st.mu.Lock()
			tt.break_(st)
			st.mu.Unlock()
			select {
			case err := <-lost:
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "r1") {
					t.Errorf("lost: %v; want it to say %q and name the replica", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the lease was never lost")
			}
			time.Sleep(200 * time.Millisecond)
			if len(lost) != 0 {
				t.Error("Lost was called twice")
			}
		})
	}
}

// Reap's ended tasks reach the session's waiters and streams.
func TestReapedTasksAreTold(t *testing.T) {
	st := &fakeStore{notices: make(chan store.Notice), reap: []a2a.TaskID{"dead-1", "dead-2"}}
	sess := &fakeSession{}
	start(t, st, sess, Config{})
	eventually(t, "the reaped tasks told", func() bool { _, r, _, _ := sess.snapshot(); return len(r) == 2 })
	eventually(t, "a poll's resync", func() bool { _, _, _, n := sess.snapshot(); return n > 0 })
}
