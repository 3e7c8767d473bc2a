package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
)

// openRetentionStore opens a store with retention r on the clock c; it is closed at cleanup.
func openRetentionStore(t *testing.T, r roster.Retention, c *clock) *Store {
	t.Helper()
	s, err := OpenWith(filepath.Join(t.TempDir(), "tasks.db"), Config{Retention: r, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// endedAt returns task n in state, its status timestamp at.
func endedAt(n int, state a2a.TaskState, at time.Time) *a2a.Task {
	t := storeTask(n, "ctx_r", state)
	t.Status.Timestamp = a2a.NewTimestamp(at)
	return t
}

// stored returns the ids the store holds, oldest first.
func stored(t *testing.T, s *Store) []a2a.TaskID {
	t.Helper()
	page, err := s.list(context.Background(), ListQuery{PageSize: a2a.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	ids := taskIDs(page.Tasks)
	slices.Reverse(ids)
	return ids
}

func TestSweepRemovesEndedTasksByAge(t *testing.T) {
	c := &clock{now: storeEpoch}
	s := openRetentionStore(t, roster.Retention{MaxAge: time.Hour, MaxTasks: 1000}, c)
	old, recent := storeEpoch.Add(-2*time.Hour), storeEpoch.Add(-30*time.Minute)
	tasks := []*a2a.Task{
		endedAt(1, a2a.TaskStateCompleted, old),
		endedAt(2, a2a.TaskStateFailed, old),
		endedAt(3, a2a.TaskStateCanceled, old),
		endedAt(4, a2a.TaskStateRejected, old),
		endedAt(5, a2a.TaskStateSubmitted, old),
		endedAt(6, a2a.TaskStateWorking, old),
		endedAt(7, a2a.TaskStateInputRequired, old),
		endedAt(8, a2a.TaskStateCompleted, recent),
		endedAt(9, a2a.TaskStateRejected, recent),
	}
	for _, task := range tasks {
		if err := s.Create(context.Background(), task); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := s.Sweep(context.Background())
	if err != nil || removed != 4 {
		t.Fatalf("Sweep removed %d (%v), want the 4 old ended tasks", removed, err)
	}
	want := []a2a.TaskID{"tsk_05", "tsk_06", "tsk_07", "tsk_08", "tsk_09"}
	if diff := cmp.Diff(want, stored(t, s)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	// The removed tasks are gone from the cache too: GetTask answers task not found.
	if _, err := s.Get(context.Background(), "tsk_01"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Get of a removed task: %v", err)
	}

	// Time passes on the injected clock; nothing real is waited for.
	c.advance(time.Hour)
	if removed, err := s.Sweep(context.Background()); err != nil || removed != 2 {
		t.Fatalf("Sweep an hour later removed %d (%v), want the 2 recent ended tasks", removed, err)
	}
	if diff := cmp.Diff(want[:3], stored(t, s)); diff != "" {
		t.Errorf("tasks that are not ended are never removed (-want +got):\n%s", diff)
	}
}

func TestSweepKeepsAtMostMaxTasksEndedRejectedFirst(t *testing.T) {
	c := &clock{now: storeEpoch}
	s := openRetentionStore(t, roster.Retention{MaxAge: 24 * time.Hour, MaxTasks: 3}, c)
	states := []a2a.TaskState{
		a2a.TaskStateCompleted, a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateRejected,
		a2a.TaskStateCompleted, a2a.TaskStateSubmitted, a2a.TaskStateRejected, a2a.TaskStateCanceled,
	}
	for i, state := range states {
		if err := s.Create(context.Background(), endedAt(i+1, state, storeEpoch.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := s.Sweep(context.Background())
	if err != nil || removed != 3 {
		t.Fatalf("Sweep removed %d (%v), want 3 of the 6 ended tasks", removed, err)
	}
	// Both rejections go first, then the oldest other ended task; the working and submitted tasks stay
	// and do not count.
	want := []a2a.TaskID{"tsk_02", "tsk_03", "tsk_05", "tsk_06", "tsk_08"}
	if diff := cmp.Diff(want, stored(t, s)); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

// The sweeper runs by itself once enough tasks have arrived, so a flood of rejections cannot grow the
// store without bound between its periodic runs; the ages it goes by are the injected clock's.
func TestSweeperRunsWhenManyTasksArrive(t *testing.T) {
	c := &clock{now: storeEpoch}
	r := roster.Retention{MaxAge: time.Hour, MaxTasks: 100}
	s := openRetentionStore(t, r, c)
	if err := s.Create(context.Background(), endedAt(0, a2a.TaskStateCompleted, storeEpoch)); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Hour)
	const flood = 1000
	for i := range flood {
		for !s.CreateBatched(endedAt(i+1, a2a.TaskStateRejected, c.Now())) {
			time.Sleep(time.Millisecond) // the buffer is full: let the writer catch up
		}
	}
	bound := r.MaxTasks + int(s.sweepAfter())
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Get(context.Background(), endedAt(0, "", storeEpoch).ID)
		page, lerr := s.list(context.Background(), ListQuery{PageSize: 1})
		if lerr != nil {
			t.Fatal(lerr)
		}
		if errors.Is(err, a2a.ErrTaskNotFound) && page.Total <= bound && s.batch.waiting() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d arrivals the store holds %d tasks (want at most %d), the old one: %v", flood, page.Total, bound, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// After a large removal the write-ahead log is cut back to journal_size_limit.
func TestSweepShrinksTheWriteAheadLog(t *testing.T) {
	c := &clock{now: storeEpoch}
	dir := t.TempDir()
	s, err := OpenWith(filepath.Join(dir, "tasks.db"), Config{Retention: roster.Retention{MaxAge: time.Hour, MaxTasks: 100000}, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 12 MiB of tasks, in one transaction: the log grows to hold them. Written past the store's methods,
	// which would otherwise know that the new store holds no task to sweep.
	s.batched.Store(true)
	big := string(make([]byte, 4096))
	tx, err := s.write.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		task := endedAt(i, a2a.TaskStateCompleted, storeEpoch)
		task.History[0].Parts = []a2a.Part{a2a.TextPart(big)}
		body, _ := json.Marshal(task)
		if err := insertTask(context.Background(), tx, task, body, storeEpoch); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Hour)
	// On a loaded machine the minute of the background sweeper can pass before this point: it may take
	// some of the tasks, so what counts is that none is left.
	if removed, err := s.Sweep(context.Background()); err != nil || removed == 0 {
		t.Fatalf("Sweep removed %d (%v)", removed, err)
	}
	for deadline := time.Now().Add(time.Minute); len(stored(t, s)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks left after the sweep", len(stored(t, s)))
		}
	}
	// The checkpoint has emptied the log; the next write starts it over and cuts it back.
	if err := s.Create(context.Background(), endedAt(9999, a2a.TaskStateSubmitted, c.Now())); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "tasks.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > walSizeLimit {
		t.Errorf("the write-ahead log is %d bytes after the sweep, want at most %d", fi.Size(), walSizeLimit)
	}
}

// Close stops the batch writer and the sweeper, after the writer has stored what it was handed.
func TestStoreCloseDrainsAndStopsItsGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []a2a.TaskID
	for i := range 300 {
		task := storeTask(i, "ctx", a2a.TaskStateRejected)
		if !s.CreateBatched(task) {
			t.Fatalf("CreateBatched %d refused", i)
		}
		ids = append(ids, task.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.CreateBatched(storeTask(1000, "ctx", a2a.TaskStateRejected)) {
		t.Error("CreateBatched after Close took the task")
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range ids {
		if _, err := s.Get(context.Background(), id); err != nil {
			t.Fatalf("a task handed to CreateBatched before Close: %v", err)
		}
	}
}

func TestStoreRetentionDefaults(t *testing.T) {
	for _, tc := range []struct {
		set, want roster.Retention
	}{
		{roster.Retention{}, roster.DefaultRetention},
		{roster.Retention{MaxAge: time.Hour}, roster.Retention{MaxAge: time.Hour, MaxTasks: 10000}},
		{roster.Retention{MaxTasks: 5}, roster.Retention{MaxAge: 168 * time.Hour, MaxTasks: 5}},
	} {
		t.Run(fmt.Sprint(tc.set), func(t *testing.T) {
			s := openRetentionStore(t, tc.set, &clock{now: storeEpoch})
			if got := s.Retention(); got != tc.want {
				t.Errorf("Retention() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// clock is a test clock that moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Config.Removed hears of every task a sweep removed, and of no other, with the store's writers free:
// a write from inside it does not wait for the sweep.
func TestSweepTellsRemoved(t *testing.T) {
	c := &clock{now: storeEpoch}
	var s *Store
	var heard []a2a.TaskID
	s, err := OpenWith(filepath.Join(t.TempDir(), "tasks.db"), Config{Retention: roster.Retention{MaxAge: time.Hour, MaxTasks: 1000}, Now: c.Now,
		Removed: func(ids []a2a.TaskID) {
			heard = append(heard, ids...)
			if err := s.Create(context.Background(), endedAt(100+len(heard), a2a.TaskStateSubmitted, storeEpoch)); err != nil {
				t.Errorf("a write from Removed: %v", err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := storeEpoch.Add(-2 * time.Hour)
	for i, state := range []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateWorking, a2a.TaskStateFailed} {
		if err := s.Create(context.Background(), endedAt(i+1, state, old)); err != nil {
			t.Fatal(err)
		}
	}
	if removed, err := s.Sweep(context.Background()); err != nil || removed != 2 {
		t.Fatalf("Sweep removed %d (%v), want 2", removed, err)
	}
	if diff := cmp.Diff([]a2a.TaskID{"tsk_01", "tsk_03"}, heard); diff != "" {
		t.Errorf("Removed heard (-want +got):\n%s", diff)
	}
}
