package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member/store"
)

// clock is a test's clock, moved by hand, shared by the replicas of a test (Config.Now).
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Add(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *clock) cfg(name string) Config { return Config{Replica: name, Now: c.Now} }

// ownerOf is task id's owner column, read behind the store's back.
func ownerOf(t *testing.T, c *pgx.Conn, id a2a.TaskID) string {
	t.Helper()
	var owner string
	if err := c.QueryRow(t.Context(), `SELECT owner FROM tasks WHERE id = $1`, string(id)).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// get is task id as s reads it.
func get(t *testing.T, s *Store, id a2a.TaskID) *a2a.Task {
	t.Helper()
	tk, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return tk
}

// renew renews s's lease, which must be held.
func renew(t *testing.T, s *Store, lease time.Duration) {
	t.Helper()
	held, err := s.Renew(t.Context(), lease, 4)
	if err != nil || !held {
		t.Fatalf("Renew of %s = %v, %v; want held", s.Replica(), held, err)
	}
}

// checkEnded fails unless tk ended in state with text as its status message at now.
func checkEnded(t *testing.T, tk *a2a.Task, state a2a.TaskState, text string, now time.Time) {
	t.Helper()
	st := tk.Status
	if st.State != state || st.Timestamp == nil || !st.Timestamp.Equal(now.Truncate(time.Millisecond)) || st.Message == nil ||
		st.Message.Role != a2a.RoleAgent || st.Message.TaskID != tk.ID || len(st.Message.Parts) != 1 ||
		st.Message.Parts[0].Text == nil || *st.Message.Parts[0].Text != text {
		t.Errorf("task %s's status = %+v; want %s with %q at %v", tk.ID, st, state, text, now)
	}
}

// TestReplicaLocks: a database is one process's or its replicas', never both, whichever opens it
// first; a replica's name is one live process's; a name not in store.ReplicaName's form is refused.
func TestReplicaLocks(t *testing.T) {
	ctx := t.Context()
	dsn := database(t)
	one, err := Open(ctx, dsn, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, dsn, Config{Replica: "r1"})
	if err == nil || !strings.Contains(err.Error(), "in use by a mur process that runs its member as one process") {
		t.Errorf("a replica's Open beside a process of one: %v", err)
	}
	t.Log(err)
	one.Close()

	r1, _ := open(t, Config{Replica: "r1"}, dsn)
	r2, _ := open(t, Config{Replica: "r2"}, dsn)
	if r1.Replica() != "r1" || r2.Replica() != "r2" {
		t.Errorf("Replica() = %q, %q", r1.Replica(), r2.Replica())
	}
	_, err = Open(ctx, dsn, Config{})
	if err == nil || !strings.Contains(err.Error(), "in use by the replicas of a member") {
		t.Errorf("a process of one's Open beside replicas: %v", err)
	}
	t.Log(err)
	_, err = Open(ctx, dsn, Config{Replica: "r1"})
	if err == nil || !strings.Contains(err.Error(), "replica r1 already runs on the task store's database") {
		t.Errorf("a second r1: %v", err)
	}
	t.Log(err)
	for _, bad := range []string{"-r", "r 1", "r/1", strings.Repeat("r", 64), "ré"} {
		if _, err := Open(ctx, dsn, Config{Replica: bad}); err == nil || !strings.Contains(err.Error(), "a replica's name is 1 to 63 letters") {
			t.Errorf("Open with replica name %q: %v", bad, err)
		}
	}
	r1.Close()
	r1again, _ := open(t, Config{Replica: "r1"}, dsn) // its lock went with its process
	r1again.Close()
	r2.Close()
	again, _ := open(t, Config{}, dsn) // and the database is free for a process of one again
	again.Close()
}

// TestReplicaOwner: a replica owns the tasks it creates; the other's writes of them fail with
// ErrNotOwner (not ErrNotFound), its writes of a task not stored with ErrNotFound (not ErrNotOwner),
// and EndAll leaves another's task out.
func TestReplicaOwner(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	db := connect(t, dsn)
	tk := task(1, "ctx", a2a.TaskStateWorking)
	mustCreate(t, r1, tk)
	if !r1.CreateBatched(task(2, "ctx", a2a.TaskStateSubmitted)) {
		t.Fatal("CreateBatched refused")
	}
	if err := r1.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []a2a.TaskID{tk.ID, task(2, "", "").ID} {
		if got := ownerOf(t, db, id); got != "r1" {
			t.Errorf("task %s's owner = %q, want r1", id, got)
		}
	}

	done := task(1, "ctx", a2a.TaskStateCompleted)
	err := r2.Update(ctx, done)
	if !errors.Is(err, store.ErrNotOwner) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("r2's Update of r1's task: %v; want ErrNotOwner", err)
	}
	t.Log(err)
	if err := r2.UpdateLater(ctx, done)(); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("r2's UpdateLater of r1's task: %v; want ErrNotOwner", err)
	}
	r2.UpdateSoon(done)
	missing := task(99, "ctx", a2a.TaskStateCompleted)
	errs := r2.UpdateAll(ctx, []*a2a.Task{done, missing})
	if !errors.Is(errs[0], store.ErrNotOwner) || !errors.Is(errs[1], store.ErrNotFound) || errors.Is(errs[1], store.ErrNotOwner) {
		t.Errorf("r2's UpdateAll of r1's task and of one not stored: %v", errs)
	}
	if ended, err := r2.EndAll(ctx, []a2a.TaskID{tk.ID}, a2a.TaskStateCanceled, "no", epoch); err != nil || len(ended) != 0 {
		t.Errorf("r2's EndAll of r1's task = %v, %v; want nothing ended", ended, err)
	}
	if err := r2.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, r1, tk.ID); got.Status.State != a2a.TaskStateWorking {
		t.Errorf("after r2's writes r1's task is %s, want still working", got.Status.State)
	}

	if err := r1.Update(ctx, done); err != nil {
		t.Errorf("r1's Update of its task: %v", err)
	}
	if got := get(t, r2, tk.ID); got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("after r1's Update its task is %s, want completed", got.Status.State)
	}
	if ended, err := r1.EndAll(ctx, []a2a.TaskID{task(2, "", "").ID}, a2a.TaskStateCanceled, "no", epoch); err != nil || len(ended) != 1 {
		t.Errorf("r1's EndAll of its task = %v, %v; want it ended", ended, err)
	}
}

// TestOfferClaim: Offer stores a task unclaimed while the live replicas have room (perReplica each),
// as Create would store it; Claim takes the oldest unclaimed submitted tasks and makes them its own.
func TestOfferClaim(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	db := connect(t, dsn)

	if ok, err := r1.Offer(ctx, task(1, "ctx", a2a.TaskStateSubmitted), 2); err != nil || ok {
		t.Fatalf("Offer with no live replica = %v, %v; want false", ok, err)
	}
	renew(t, r1, time.Minute)
	renew(t, r2, time.Minute)
	// Room for 2×2 unended tasks: r1's working one, then three offered.
	mustCreate(t, r1, task(10, "ctx", a2a.TaskStateWorking))
	for n := 1; n <= 4; n++ {
		ok, err := r1.Offer(ctx, task(n, "ctx", a2a.TaskStateSubmitted), 2)
		if err != nil || ok != (n <= 3) {
			t.Errorf("Offer %d = %v, %v; want %v", n, ok, err, n <= 3)
		}
	}
	if _, err := r1.Offer(ctx, task(10, "ctx", a2a.TaskStateSubmitted), 100); err == nil || !strings.Contains(err.Error(), "already stored") {
		t.Errorf("Offer of an id already stored: %v", err)
	}
	var owner, message string
	if err := db.QueryRow(ctx, `SELECT owner, message_id FROM tasks WHERE id = $1`, string(task(1, "", "").ID)).Scan(&owner, &message); err != nil {
		t.Fatal(err)
	}
	if owner != "" || message != "msg_0001" {
		t.Errorf("an offered task's owner, message_id = %q, %q; want \"\", msg_0001", owner, message)
	}
	if got, err := r2.GetByMessage(ctx, "", "msg_0002"); err != nil || got.ID != task(2, "", "").ID {
		t.Errorf("GetByMessage of an offered task = %v, %v", got, err)
	}

	// A lapsed replica's place is not counted: r1 lapses, one place for r2's two.
	c.Add(30 * time.Second)
	renew(t, r2, time.Minute)
	c.Add(31 * time.Second)
	if ok, err := r2.Offer(ctx, task(5, "ctx", a2a.TaskStateSubmitted), 4); err != nil || !ok {
		t.Errorf("Offer with r1 lapsed (r1's working task not counted, 3 unclaimed of 4 places) = %v, %v; want true", ok, err)
	}
	if ok, err := r2.Offer(ctx, task(6, "ctx", a2a.TaskStateSubmitted), 4); err != nil || ok {
		t.Errorf("Offer with r2's 4 places taken = %v, %v; want false", ok, err)
	}

	claimed, err := r2.Claim(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ids := taskIDsOf(claimed); !slices.Equal(ids, []a2a.TaskID{task(1, "", "").ID, task(2, "", "").ID}) {
		t.Errorf("r2 claimed %v; want the two oldest", ids)
	}
	if len(claimed) > 0 && claimed[0].History[0].MessageID != "msg_0001" {
		t.Errorf("a claimed task: %+v", claimed[0])
	}
	if got := ownerOf(t, db, task(1, "", "").ID); got != "r2" {
		t.Errorf("a claimed task's owner = %q, want r2", got)
	}
	rest, err := r1.Claim(ctx, 10)
	if ids := taskIDsOf(rest); err != nil || !slices.Equal(ids, []a2a.TaskID{task(3, "", "").ID, task(5, "", "").ID}) {
		t.Errorf("r1 claimed %v, %v; want tasks 3 and 5", ids, err)
	}
	if more, err := r1.Claim(ctx, 10); err != nil || len(more) != 0 {
		t.Errorf("Claim with none left = %v, %v", taskIDsOf(more), err)
	}
	working := task(1, "ctx", a2a.TaskStateWorking)
	if err := r2.Update(ctx, working); err != nil {
		t.Errorf("r2's Update of the task it claimed: %v", err)
	}
	if err := r1.Update(ctx, working); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("r1's Update of the task r2 claimed: %v; want ErrNotOwner", err)
	}
}

// TestClaimConcurrent: two replicas claiming 50 offered tasks at once claim each exactly once.
func TestClaimConcurrent(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	renew(t, r1, time.Hour)
	renew(t, r2, time.Hour)
	const n = 50
	for i := range n {
		if ok, err := r1.Offer(ctx, task(i, "ctx", a2a.TaskStateSubmitted), n); err != nil || !ok {
			t.Fatalf("Offer %d = %v, %v", i, ok, err)
		}
	}
	var mu sync.Mutex
	claimedBy := map[a2a.TaskID][]string{}
	var wg sync.WaitGroup
	for _, s := range []*Store{r1, r2, r1, r2} {
		wg.Go(func() {
			for {
				ts, err := s.Claim(ctx, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ts) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range ts {
					claimedBy[tk.ID] = append(claimedBy[tk.ID], s.Replica())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimedBy) != n {
		t.Errorf("%d tasks claimed, want %d", len(claimedBy), n)
	}
	per := map[string]int{}
	for id, by := range claimedBy {
		if len(by) != 1 {
			t.Errorf("task %s claimed by %v", id, by)
		}
		per[by[0]]++
	}
	db := connect(t, dsn)
	for id, by := range claimedBy {
		if got := ownerOf(t, db, id); got != by[0] {
			t.Errorf("task %s's owner = %q, claimed by %s", id, got, by[0])
		}
	}
	t.Logf("claimed: %v", per)
}

// TestReap: a replica whose lease lapsed is reaped by another: its running tasks end failed with
// RestartMessage, its submitted ones become unclaimed (and the reaper claims them), its lease row goes,
// its next Renew answers false and its writes of its old tasks fail with ErrNotOwner.
func TestReap(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	renew(t, r1, time.Second)
	renew(t, r2, time.Minute)
	if infos, err := r2.Replicas(ctx); err != nil || len(infos) != 2 || infos[0].Name != "r1" || infos[1].Name != "r2" ||
		!infos[0].LeaseUntil.Equal(epoch.Add(time.Second)) || !infos[0].Started.Equal(epoch) || infos[0].Free != 4 {
		t.Errorf("Replicas = %+v, %v", infos, err)
	}
	working, input, queued, done := task(1, "ctx", a2a.TaskStateWorking), task(2, "ctx", a2a.TaskStateInputRequired),
		task(3, "ctx", a2a.TaskStateSubmitted), task(4, "ctx", a2a.TaskStateCompleted)
	mustCreate(t, r1, working, input, queued, done)
	mustCreate(t, r2, task(5, "ctx", a2a.TaskStateWorking))

	if ended, err := r2.Reap(ctx, c.Now()); err != nil || len(ended) != 0 {
		t.Errorf("Reap before any lease lapsed = %v, %v", ended, err)
	}
	c.Add(2 * time.Second)
	now := c.Now()
	if ended, err := r1.Reap(ctx, now); err != nil || len(ended) != 0 {
		t.Errorf("r1's Reap of itself: %v, %v; want nothing (a replica never reaps itself)", ended, err)
	}
	ended, err := r2.Reap(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ended, []a2a.TaskID{working.ID, input.ID}) {
		t.Errorf("Reap ended %v; want r1's running tasks, in creation order", ended)
	}
	checkEnded(t, get(t, r2, working.ID), a2a.TaskStateFailed, store.RestartMessage, now)
	checkEnded(t, get(t, r2, input.ID), a2a.TaskStateFailed, store.RestartMessage, now)
	if got := get(t, r2, done.ID); got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("r1's completed task is %s after Reap", got.Status.State)
	}
	db := connect(t, dsn)
	if got := ownerOf(t, db, queued.ID); got != "" {
		t.Errorf("r1's submitted task's owner after Reap = %q, want unclaimed", got)
	}
	if infos, err := r2.Replicas(ctx); err != nil || len(infos) != 1 || infos[0].Name != "r2" {
		t.Errorf("Replicas after Reap = %+v, %v; want r2 alone", infos, err)
	}
	if again, err := r2.Reap(ctx, now.Add(time.Minute)); err != nil || len(again) != 0 {
		t.Errorf("a second Reap = %v, %v", again, err)
	}
	claimed, err := r2.Claim(ctx, 5)
	if err != nil || !slices.Equal(taskIDsOf(claimed), []a2a.TaskID{queued.ID}) {
		t.Errorf("r2's Claim after Reap = %v, %v; want r1's submitted task", taskIDsOf(claimed), err)
	}

	// r1, alive after all, learns it was reaped and can no longer write what it ran.
	for range 2 {
		if held, err := r1.Renew(ctx, time.Second, 4); err != nil || held {
			t.Errorf("r1's Renew after it was reaped = %v, %v; want false", held, err)
		}
	}
	if infos, _ := r2.Replicas(ctx); len(infos) != 1 {
		t.Errorf("r1's Renew re-created its row: %+v", infos)
	}
	if err := r1.Update(ctx, task(1, "ctx", a2a.TaskStateCompleted)); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("r1's Update of its reaped task: %v; want ErrNotOwner", err)
	}
	checkEnded(t, get(t, r2, working.ID), a2a.TaskStateFailed, store.RestartMessage, now)
}

// TestReapConcurrent: replicas reaping the same dead ones at once end each task once.
func TestReapConcurrent(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	dsn := database(t)
	var dead []*Store
	for i := range 3 {
		s, _ := open(t, c.cfg(fmt.Sprintf("dead%d", i)), dsn)
		renew(t, s, time.Second)
		for j := range 10 {
			mustCreate(t, s, task(100*i+j, "ctx", a2a.TaskStateWorking))
		}
		dead = append(dead, s)
	}
	var reapers []*Store
	for i := range 3 {
		s, _ := open(t, c.cfg(fmt.Sprintf("live%d", i)), dsn)
		renew(t, s, time.Hour)
		reapers = append(reapers, s)
	}
	c.Add(time.Minute)
	var mu sync.Mutex
	count := map[a2a.TaskID]int{}
	var wg sync.WaitGroup
	for _, s := range reapers {
		wg.Go(func() {
			ended, err := s.Reap(ctx, c.Now())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, id := range ended {
				count[id]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(count) != 30 {
		t.Errorf("%d tasks ended, want 30", len(count))
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("task %s ended %d times", id, n)
		}
	}
	for _, s := range dead {
		if held, err := s.Renew(ctx, time.Second, 0); held || err != nil {
			t.Errorf("%s's Renew after Reap = %v, %v", s.Replica(), held, err)
		}
	}
}

// TestReplicaRecover: a replica restarted under its name ends the tasks its previous process ran,
// releases the ones it had queued, and leaves the other replicas' tasks alone.
func TestReplicaRecover(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	working, auth, queued, done := task(1, "ctx", a2a.TaskStateWorking), task(2, "ctx", a2a.TaskStateAuthRequired),
		task(3, "ctx", a2a.TaskStateSubmitted), task(4, "ctx", a2a.TaskStateCompleted)
	mustCreate(t, r1, working, auth, queued, done)
	other := task(5, "ctx", a2a.TaskStateWorking)
	mustCreate(t, r2, other)
	r1.Close()

	r1, _ = open(t, c.cfg("r1"), dsn)
	now := epoch.Add(time.Hour)
	ended, err := r1.Recover(ctx, now)
	if err != nil || !slices.Equal(ended, []a2a.TaskID{working.ID, auth.ID}) {
		t.Fatalf("Recover = %v, %v; want r1's running tasks", ended, err)
	}
	checkEnded(t, get(t, r1, working.ID), a2a.TaskStateFailed, store.RestartMessage, now)
	checkEnded(t, get(t, r1, auth.ID), a2a.TaskStateFailed, store.RestartMessage, now)
	db := connect(t, dsn)
	if got := get(t, r1, queued.ID); got.Status.State != a2a.TaskStateSubmitted || ownerOf(t, db, queued.ID) != "" {
		t.Errorf("r1's submitted task after Recover: %s, owner %q; want submitted, unclaimed", got.Status.State, ownerOf(t, db, queued.ID))
	}
	if got := get(t, r1, done.ID); got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("r1's completed task after Recover: %s", got.Status.State)
	}
	if got := get(t, r1, other.ID); got.Status.State != a2a.TaskStateWorking || ownerOf(t, db, other.ID) != "r2" {
		t.Errorf("r2's task after r1's Recover: %s", got.Status.State)
	}
	if again, err := r1.Recover(ctx, now); err != nil || len(again) != 0 {
		t.Errorf("a second Recover = %v, %v", again, err)
	}
	if claimed, err := r2.Claim(ctx, 5); err != nil || !slices.Equal(taskIDsOf(claimed), []a2a.TaskID{queued.ID}) {
		t.Errorf("r2's Claim after r1's Recover = %v, %v", taskIDsOf(claimed), err)
	}
}

// watcher runs s.Watch until the test ends, and hands over what it reports.
func watcher(t *testing.T, s *Store) <-chan store.Notice {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan store.Notice, 1000)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Watch(ctx, func(n store.Notice) { ch <- n }); !errors.Is(err, context.Canceled) {
			t.Errorf("Watch = %v; want context.Canceled", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ch
}

// await returns the first notice from ch that ok accepts, failing after a while.
func await(t *testing.T, ch <-chan store.Notice, what string, ok func(store.Notice) bool) store.Notice {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case n := <-ch:
			if ok(n) {
				return n
			}
		case <-timeout:
			t.Fatalf("Watch did not report %s", what)
		}
	}
}

// settleWatch returns once w reports a change made after it was started: it listens.
func settleWatch(t *testing.T, s *Store, ch <-chan store.Notice, n int) {
	t.Helper()
	probe := task(n, "probe", a2a.TaskStateSubmitted)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		probe.ID = a2a.TaskID(fmt.Sprintf("probe_%d_%d", n, i))
		probe.History[0].MessageID = a2a.MessageID(probe.ID) // a message per probe: a replica stores one task per message
		mustCreate(t, s, probe)
		select {
		case got := <-ch:
			for got.ID != probe.ID {
				got = <-ch
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch never listened")
		}
	}
}

// TestRequestCancel: a live replica's task is marked, and its Watch sees Cancel; an unclaimed task,
// or one of a lapsed replica, is ended canceled where it is asked; an ended task, or one this replica
// owns, is left as it is.
func TestRequestCancel(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	r3, _ := open(t, c.cfg("r3"), dsn)
	renew(t, r1, time.Hour)
	renew(t, r2, time.Hour)
	renew(t, r3, time.Second)
	notices := watcher(t, r1)
	settleWatch(t, r1, notices, 0)

	live := task(1, "ctx", a2a.TaskStateWorking)
	mustCreate(t, r1, live)
	owner, ended, err := r2.RequestCancel(ctx, live.ID, "canceled by the user", c.Now())
	if err != nil || owner != "r1" || ended {
		t.Errorf("RequestCancel of r1's live task = %q, %v, %v; want r1, not ended", owner, ended, err)
	}
	n := await(t, notices, "the cancellation", func(n store.Notice) bool { return n.ID == live.ID && n.Cancel })
	if n.Owner != "r1" || n.State != a2a.TaskStateWorking {
		t.Errorf("the cancellation's notice = %+v", n)
	}
	if got := get(t, r1, live.ID); got.Status.State != a2a.TaskStateWorking {
		t.Errorf("a marked task is %s, want still working", got.Status.State)
	}
	if owner, ended, err := r1.RequestCancel(ctx, live.ID, "x", c.Now()); err != nil || owner != "r1" || ended {
		t.Errorf("r1's RequestCancel of its own task = %q, %v, %v", owner, ended, err)
	}
	// The owner ends it: the notice no longer asks for a cancellation.
	if err := r1.Update(ctx, task(1, "ctx", a2a.TaskStateCanceled)); err != nil {
		t.Fatal(err)
	}
	n = await(t, notices, "the task's end", func(n store.Notice) bool { return n.ID == live.ID && n.State == a2a.TaskStateCanceled })
	if n.Cancel || n.Owner != "r1" {
		t.Errorf("the ended task's notice = %+v; want no cancellation", n)
	}
	if owner, ended, err := r2.RequestCancel(ctx, live.ID, "x", c.Now()); err != nil || owner != "" || ended {
		t.Errorf("RequestCancel of an ended task = %q, %v, %v", owner, ended, err)
	}

	// Unclaimed: ended here.
	queued := task(2, "ctx", a2a.TaskStateSubmitted)
	if ok, err := r2.Offer(ctx, queued, 10); err != nil || !ok {
		t.Fatalf("Offer = %v, %v", ok, err)
	}
	now := epoch.Add(time.Minute)
	owner, ended, err = r2.RequestCancel(ctx, queued.ID, "canceled by the user", now)
	if err != nil || owner != "" || !ended {
		t.Errorf("RequestCancel of an unclaimed task = %q, %v, %v; want ended", owner, ended, err)
	}
	checkEnded(t, get(t, r2, queued.ID), a2a.TaskStateCanceled, "canceled by the user", now)
	await(t, notices, "the unclaimed task's end", func(n store.Notice) bool {
		return n.ID == queued.ID && n.State == a2a.TaskStateCanceled && !n.Cancel
	})

	// r3's lease lapsed (not reaped yet): its task is ended here, and r3 can no longer write it.
	orphan := task(3, "ctx", a2a.TaskStateWorking)
	mustCreate(t, r3, orphan)
	c.Add(time.Minute)
	owner, ended, err = r2.RequestCancel(ctx, orphan.ID, "canceled by the user", c.Now())
	if err != nil || owner != "r3" || !ended {
		t.Errorf("RequestCancel of a lapsed replica's task = %q, %v, %v; want r3, ended", owner, ended, err)
	}
	checkEnded(t, get(t, r2, orphan.ID), a2a.TaskStateCanceled, "canceled by the user", c.Now())
	if err := r3.Update(ctx, orphan); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("r3's Update of the task canceled for it: %v; want ErrNotOwner", err)
	}

	if _, _, err := r2.RequestCancel(ctx, "tsk_none", "x", c.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RequestCancel of a task not stored: %v", err)
	}
}

// TestWatch: a replica's Watch reports the other's changes, in order per task, and Resync once it
// listens again after the database restarted; it returns when its context ends (goleak checks that
// nothing of it is left).
func TestWatch(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	renew(t, r1, time.Hour)
	renew(t, r2, time.Hour)
	notices := watcher(t, r1)
	settleWatch(t, r2, notices, 0)

	tk := task(1, "ctx", a2a.TaskStateSubmitted)
	if ok, err := r2.Offer(ctx, tk, 10); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := r2.Claim(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Two changes of one task in one transaction are two notices.
	errs := r2.UpdateAll(ctx, []*a2a.Task{task(1, "ctx", a2a.TaskStateWorking), task(1, "ctx", a2a.TaskStateInputRequired)})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := []store.Notice{
		{ID: tk.ID, State: a2a.TaskStateSubmitted},
		{ID: tk.ID, Owner: "r2", State: a2a.TaskStateSubmitted},
		{ID: tk.ID, Owner: "r2", State: a2a.TaskStateWorking},
		{ID: tk.ID, Owner: "r2", State: a2a.TaskStateInputRequired},
	}
	for i, w := range want {
		got := await(t, notices, fmt.Sprintf("change %d", i), func(store.Notice) bool { return true })
		if got != w {
			t.Errorf("notice %d = %+v; want %+v", i, got, w)
		}
	}

	pgtest.Start(t).Restart(t)
	await(t, notices, "Resync after the restart", func(n store.Notice) bool { return n.Resync })
	// Listening again: a change after the restart is reported (the first write may meet a dead pool).
	for i := 0; ; i++ {
		err := r2.Update(ctx, task(1, "ctx", a2a.TaskStateCompleted))
		if err == nil {
			break
		}
		if i == 5 {
			t.Fatalf("Update after the restart: %v", err)
		}
	}
	n := await(t, notices, "a change after the restart", func(n store.Notice) bool { return n.ID == tk.ID })
	if n.State != a2a.TaskStateCompleted || n.Owner != "r2" {
		t.Errorf("the notice after the restart = %+v", n)
	}
}

// TestParseNotice: the trigger's payloads, an empty owner and an id with spaces among them.
func TestParseNotice(t *testing.T) {
	for _, tt := range []struct {
		payload string
		want    store.Notice
		ok      bool
	}{
		{"tsk_1 3 r1 TASK_STATE_WORKING 1", store.Notice{ID: "tsk_1", Owner: "r1", State: a2a.TaskStateWorking, Cancel: true}, true},
		{"tsk_1 1  TASK_STATE_SUBMITTED 0", store.Notice{ID: "tsk_1", State: a2a.TaskStateSubmitted}, true},
		{"a b 1 r2 TASK_STATE_FAILED 0", store.Notice{ID: "a b", Owner: "r2", State: a2a.TaskStateFailed}, true},
		{"tsk_1 TASK_STATE_FAILED 0", store.Notice{}, false},
		{"tsk_1 1 r1 TASK_STATE_FAILED x", store.Notice{}, false},
	} {
		got, ok := parseNotice(tt.payload)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseNotice(%q) = %+v, %v; want %+v, %v", tt.payload, got, ok, tt.want, tt.ok)
		}
	}
}
