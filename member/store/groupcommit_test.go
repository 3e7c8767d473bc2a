package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
)

// Writes that wait at the same moment share one transaction (one fsync), and a row that fails in it (a
// duplicate id, an update of a task not stored) fails alone: the others are stored, durably, and read
// back after the store is closed and opened again.
func TestConcurrentWritesShareOneCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, storeTask(0, "ctx", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	groups := map[string][]int{}
	s.SetWriteHook(func(op string, rows int) {
		mu.Lock()
		groups[op] = append(groups[op], rows)
		mu.Unlock()
	})

	const n = 40
	unlock := s.LockWrites() // a long write holds the store while the writers come
	defer unlock()
	errs := make([]error, n+2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Create(ctx, storeTask(i+1, "ctx", a2a.TaskStateSubmitted)) })
	}
	wg.Go(func() { errs[n] = s.Create(ctx, storeTask(0, "ctx", a2a.TaskStateSubmitted)) }) // a duplicate
	wg.Go(func() {
		errs[n+1] = s.Update(ctx, storeTask(99, "ctx", a2a.TaskStateCompleted)) // never created
	})
	for s.waitingWrites() < n+2 {
		time.Sleep(time.Millisecond)
	}
	unlock()
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Errorf("create %d: %v", i+1, errs[i])
		}
	}
	if errs[n] == nil {
		t.Error("a second create of tsk_00 succeeded")
	}
	if !errors.Is(errs[n+1], ErrNotFound) {
		t.Errorf("an update of a task never stored answered %v, want ErrNotFound", errs[n+1])
	}
	mu.Lock()
	if len(groups["create"]) != 1 || groups["create"][0] != n || len(groups["update"]) != 0 {
		t.Errorf("%d concurrent creates were written in groups %v, want one group of %d", n, groups, n)
	}
	mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n + 1 {
		if _, err := s.Get(ctx, storeTask(i, "ctx", a2a.TaskStateSubmitted).ID); err != nil {
			t.Errorf("after reopening: task %d: %v", i, err)
		}
	}
	page, err := s.list(ctx, ListQuery{PageSize: 100})
	if err != nil || page.Total != n+1 {
		t.Errorf("after reopening the store lists %d tasks (%v), want %d", page.Total, err, n+1)
	}
}

// A write handed to a closed store fails; it never waits forever.
func TestWriteAfterCloseFails(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Create(context.Background(), storeTask(1, "ctx", a2a.TaskStateSubmitted)); err == nil {
		t.Error("Create after Close succeeded")
	}
}

// ListTasks's total for a state and caller filter comes from task_counts, which the triggers keep equal
// to counting the table through creates, updates, batched rejections, recovery and retention's removals.
func TestTaskCountsFollowEveryWrite(t *testing.T) {
	c := &clock{now: storeEpoch}
	s := openRetentionStore(t, roster.Retention{MaxAge: time.Hour, MaxTasks: 1000}, c)
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		for _, state := range []a2a.TaskState{"", a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted,
			a2a.TaskStateFailed, a2a.TaskStateRejected} {
			for _, caller := range []string{"", "peer"} {
				page, err := s.list(ctx, ListQuery{State: state, Caller: caller, PageSize: 1})
				if err != nil {
					t.Fatal(err)
				}
				query, args := `SELECT count(*) FROM tasks WHERE (? = '' OR state = ?) AND (? = '' OR caller = ?)`, []any{string(state), string(state), caller, caller}
				var want int
				if err := s.read.QueryRow(query, args...).Scan(&want); err != nil {
					t.Fatal(err)
				}
				if page.Total != want {
					t.Errorf("%s: state %q caller %q: total %d, the table holds %d", when, state, caller, page.Total, want)
				}
			}
		}
	}
	old := storeEpoch.Add(-2 * time.Hour)
	// Every third task is a peer's.
	task := func(n int, state a2a.TaskState) *a2a.Task {
		task := endedAt(n, state, old)
		if n%3 == 0 {
			task.Metadata = map[string]any{"murmur": map[string]any{"caller": "peer"}}
		}
		return task
	}
	for n := range 20 {
		if err := s.Create(ctx, task(n, a2a.TaskStateSubmitted)); err != nil {
			t.Fatal(err)
		}
	}
	check("after creates")
	for n := range 10 {
		if err := s.Update(ctx, task(n, a2a.TaskStateCompleted)); err != nil {
			t.Fatal(err)
		}
	}
	check("after updates")
	for n := 20; n < 25; n++ {
		s.CreateBatched(endedAt(n, a2a.TaskStateRejected, old))
	}
	for s.batch.waiting() > 0 || s.batchPending() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	check("after a batch")
	if _, err := s.Recover(ctx, storeEpoch); err != nil {
		t.Fatal(err)
	}
	check("after recovery")
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a sweep")
}

func (s *Store) batchPending() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.pending)
}

// A task's UpdateSoon and the Update after it are committed in that order, whatever groups they fall in:
// many tasks started (working, not waited for) and ended (completed) at once all end completed, in the
// cache and in the file.
func TestUpdateSoonKeepsATasksOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const writers, each = 8, 150
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				if err := s.Create(ctx, storeTask(n, "ctx", a2a.TaskStateSubmitted)); err != nil {
					t.Error(err)
					return
				}
				s.UpdateSoon(storeTask(n, "ctx", a2a.TaskStateWorking))
				if err := s.Update(ctx, storeTask(n, "ctx", a2a.TaskStateCompleted)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	check := func(when string) {
		for n := range writers * each {
			got, err := s.Get(ctx, storeTask(n, "ctx", "").ID)
			if err != nil || got.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("%s: task %d is %v (%v), want completed", when, n, got.Status.State, err)
			}
		}
	}
	check("before closing")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after reopening")
}

// TestSettleWaitsForUpdateSoon: a change handed to UpdateSoon is in the file, for another reader of it,
// once Settle returns, and not before it is committed.
func TestSettleWaitsForUpdateSoon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Create(ctx, storeTask(1, "ctx", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	unlock := s.LockWrites() // the committer cannot write UpdateSoon's row yet
	s.UpdateSoon(storeTask(1, "ctx", a2a.TaskStateWorking))
	settled := make(chan error, 1)
	go func() { settled <- s.Settle(ctx) }()
	select {
	case err := <-settled:
		t.Fatalf("Settle returned (%v) while the row it must wait for could not be written", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state string
	if err := db.QueryRow(`SELECT state FROM tasks WHERE id = ?`, "tsk_01").Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != string(a2a.TaskStateWorking) {
		t.Errorf("after Settle the file holds the task %s, want %s", state, a2a.TaskStateWorking)
	}
}

// GetAll returns the tasks asked for in the order asked, from the cache and from the file (more than one
// query's worth), leaving out an id the store does not hold; UpdateAll's changes are what it reads back
// after the store is opened again.
func TestGetAllReadsEveryStoredTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 2500
	ts := make([]*a2a.Task, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		ts[i] = storeTask(i+1, "ctx_a", a2a.TaskStateSubmitted)
		wg.Go(func() { errs[i] = s.Create(ctx, ts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, task := range ts {
		task.Status.State = a2a.TaskStateCanceled
	}
	if err := errors.Join(s.UpdateAll(ctx, ts)...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, ts[7].ID); err != nil { // one from the cache
		t.Fatal(err)
	}
	var ids []a2a.TaskID
	for i := n - 1; i >= 0; i-- {
		ids = append(ids, ts[i].ID)
		if i == n/2 {
			ids = append(ids, "tsk_missing")
		}
	}
	got, err := s.GetAll(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("GetAll returned %d tasks, want %d", len(got), n)
	}
	for i, task := range got {
		if want := ts[n-1-i]; task.ID != want.ID || task.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("GetAll[%d] = %s %s, want %s canceled", i, task.ID, task.Status.State, want.ID)
		}
	}
}

// TestUpdateLater: UpdateLater returns at once, even while the committer cannot write; Get shows the
// change only once it is committed, when the wait returns; an Update handed over after it is committed
// after it; a task the store does not hold is ErrNotFound; a row handed over before Close is written, one
// after it fails.
func TestUpdateLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for n := 1; n <= 2; n++ {
		if err := s.Create(ctx, storeTask(n, "ctx", a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
	}
	unlock := s.LockWrites()
	wait := s.UpdateLater(ctx, storeTask(1, "ctx", a2a.TaskStateCompleted)) // returns though nothing can be written
	waited := make(chan error, 1)
	go func() { waited <- wait() }()
	select {
	case err := <-waited:
		t.Fatalf("the wait returned (%v) before its row could be written", err)
	case <-time.After(100 * time.Millisecond):
	}
	if got, _ := s.Get(ctx, "tsk_01"); got.Status.State != a2a.TaskStateWorking {
		t.Errorf("before its commit Get shows %s", got.Status.State)
	}
	unlock()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "tsk_01"); got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("once durable Get shows %s, want completed", got.Status.State)
	}
	// Order: the later Update wins.
	wait = s.UpdateLater(ctx, storeTask(2, "ctx", a2a.TaskStateCompleted))
	if err := s.Update(ctx, storeTask(2, "ctx", a2a.TaskStateFailed)); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "tsk_02"); got.Status.State != a2a.TaskStateFailed {
		t.Errorf("an Update after UpdateLater left %s, want failed", got.Status.State)
	}
	if err := s.UpdateLater(ctx, storeTask(9, "ctx", a2a.TaskStateCompleted))(); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateLater of a task not stored: %v, want ErrNotFound", err)
	}
	// Handed over, then Close: written; handed over after Close: refused.
	unlock = s.LockWrites()
	wait = s.UpdateLater(ctx, storeTask(1, "ctx", a2a.TaskStateCanceled))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	unlock()
	if err := wait(); err != nil {
		t.Errorf("a row handed over before Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateLater(ctx, storeTask(1, "ctx", a2a.TaskStateFailed))(); err == nil {
		t.Error("UpdateLater after Close reported success")
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Get(ctx, "tsk_01"); got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("after reopening tsk_01 is %s, want the canceled handed over before Close", got.Status.State)
	}
}

// A task's progress (UpdateSoon) that the committer has not taken when the task's next write is handed
// over is not written: the later write replaces its row, whole. Reads show the progress until then, and
// the later write once committed; a write someone waits for is never replaced.
func TestLaterWriteReplacesUntakenProgress(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for n := range 2 {
		if err := s.Create(ctx, storeTask(n+1, "ctx", a2a.TaskStateSubmitted)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var updated []int
	s.SetWriteHook(func(op string, rows int) {
		if op == opUpdate {
			mu.Lock()
			updated = append(updated, rows)
			mu.Unlock()
		}
	})
	unlock := s.LockWrites() // the committer takes nothing until both writes are handed over
	defer unlock()
	s.UpdateSoon(storeTask(1, "ctx", a2a.TaskStateWorking))
	if got, err := s.Get(ctx, "tsk_01"); err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("Get before the commit = %v, %v; want the progress shown", got, err)
	}
	wait := s.UpdateLater(ctx, storeTask(1, "ctx", a2a.TaskStateCompleted))
	waited := s.UpdateLater(ctx, storeTask(2, "ctx", a2a.TaskStateCompleted))
	s.UpdateSoon(storeTask(2, "ctx", a2a.TaskStateWorking)) // after a waited-for write: replaces it, whose waiter is answered with it
	unlock()
	for _, w := range []func() error{wait, waited} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "tsk_01")
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("Get after the commit = %v, %v; want the end", got, err)
	}
	if got, err := s.Get(ctx, "tsk_02"); err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("tsk_02 after the commit = %v, %v; want its last write", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(updated) != 1 || updated[0] != 2 {
		t.Errorf("update rows per group %v, want [2]: each task's last write alone (tsk_01's progress and tsk_02's end replaced)", updated)
	}
}

// TestCreateLaterRunsBeforeItsCreationIsDurable: a task CreateLater hands over is shown at once, and the
// writes of its run handed over before the committer takes its creation are inserted with it, in one
// row; its creation's wait is answered once that row is durable. UpdateAll and EndAll find a task whose
// creation is not taken yet.
func TestCreateLaterRunsBeforeItsCreationIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var mu sync.Mutex
	rows := map[string]int{}
	s.SetWriteHook(func(op string, n int) {
		mu.Lock()
		rows[op] += n
		mu.Unlock()
	})
	unlock := s.LockWrites()
	defer unlock()
	created := s.CreateLater(ctx, storeTask(1, "ctx", a2a.TaskStateSubmitted))
	if got, err := s.Get(ctx, "tsk_01"); err != nil || got.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("Get before the commit = %v, %v; want the task shown", got, err)
	}
	s.UpdateSoon(storeTask(1, "ctx", a2a.TaskStateWorking))
	ended := s.UpdateLater(ctx, storeTask(1, "ctx", a2a.TaskStateCompleted))
	unlock()
	for _, w := range []func() error{created, ended} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if rows[opCreate] != 1 || rows[opUpdate] != 0 {
		t.Errorf("rows written %v, want one create and no update: the end inserted in the creation's row", rows)
	}
	mu.Unlock()
	byMessage, err := s.GetByMessage(ctx, "", "msg_in_01")
	if err != nil || byMessage.ID != "tsk_01" {
		t.Errorf("GetByMessage = %v, %v; want tsk_01: the row keeps its creation's columns", byMessage, err)
	}

	// UpdateAll and EndAll take a creation the committer has not taken yet, and write after it.
	resume := s.PauseCommitter()
	defer resume()
	created2 := s.CreateLater(ctx, storeTask(2, "ctx", a2a.TaskStateSubmitted))
	if errs := s.UpdateAll(ctx, []*a2a.Task{storeTask(2, "ctx", a2a.TaskStateCanceled)}); errs[0] != nil {
		t.Fatalf("UpdateAll of a task CreateLater handed over: %v", errs[0])
	}
	created3 := s.CreateLater(ctx, storeTask(3, "ctx", a2a.TaskStateSubmitted))
	if ids, err := s.EndAll(ctx, []a2a.TaskID{"tsk_03"}, a2a.TaskStateCanceled, "bye", time.Now()); err != nil || len(ids) != 1 {
		t.Fatalf("EndAll of a task CreateLater handed over = %v, %v; want it ended", ids, err)
	}
	resume()
	for _, w := range []func() error{created2, created3} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for id, want := range map[a2a.TaskID]a2a.TaskState{"tsk_01": a2a.TaskStateCompleted, "tsk_02": a2a.TaskStateCanceled, "tsk_03": a2a.TaskStateCanceled} {
		if got, err := r.Get(ctx, id); err != nil || got.Status.State != want {
			t.Errorf("%s reopened = %v, %v; want %s", id, got, err, want)
		}
	}
}
