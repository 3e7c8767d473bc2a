package member

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/store"
)

// gatedCapsule's tasks run until the test creates the file "go" in the capsule directory.
const gatedCapsule = "name: s\nscript:\n  command: [sh, -c, 'while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; echo done']\n"

// setWriteHook sets st's write hook; the write lock orders it before every write that calls it.
func setWriteHook(st *store.Store, hook func(op string, rows int)) {
	st.SetWriteHook(hook)
}

// holdWriteLock takes st's write lock, as a long write would, and returns what lets it go; a test that
// fails lets it go at cleanup.
func holdWriteLock(t *testing.T, st *store.Store) (unlock func()) {
	unlock = st.LockWrites()
	t.Cleanup(unlock)
	return unlock
}

// busySession starts a session whose one task runs until release is called, and waits until it is
// working, so that every further task is rejected as busy.
func busySession(t *testing.T) (s *testSession, running *a2a.Task, release func()) {
	t.Helper()
	s = newSession(t, map[string]string{"murmur.yaml": gatedCapsule})
	running, err := s.Send(context.Background(), userMsg("work"), Origin{})
	if err != nil || running.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("the first task: %+v %v", running, err)
	}
	waitForState(t, s.Session, running.ID, a2a.TaskStateWorking)
	return s, running, func() { os.WriteFile(filepath.Join(s.dir, "go"), nil, 0o644) }
}

func userMsg(text string) *a2a.Message {
	return &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}
}

// fresh is msg with a message id of its own: a message sent again with the same id is a retry, answered
// with the task it created.
func fresh(msg *a2a.Message) *a2a.Message {
	m := *msg
	m.MessageID = a2a.MessageID(ids.New(ids.PrefixMessage))
	return &m
}

func waitForState(t *testing.T, s *Session, id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		task, err := s.Get(context.Background(), id, nil, store.OperatorScope())
		if err == nil && task.Status.State == want {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached %s: %+v %v", id, want, task, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStored polls until the store lists n tasks in state.
func waitStored(t *testing.T, st *store.Store, state a2a.TaskState, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := st.ListInScope(context.Background(), store.ListQuery{State: state, PageSize: 1}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if page.Total == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store lists %d tasks %s, want %d", page.Total, state, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sendAll sends n tasks from one goroutine and delivers what Send returned on the channel, closing it
// after the last. The caller waits on it with a deadline, so a Send that blocks fails the test instead
// of hanging it.
func sendAll(s *Session, n int) <-chan *a2a.Task {
	out := make(chan *a2a.Task, n)
	go func() {
		defer close(out)
		for i := range n {
			task, err := s.Send(context.Background(), userMsg(fmt.Sprintf("flood %d", i)), Origin{})
			if err != nil {
				return
			}
			out <- task
		}
	}()
	return out
}

// collect reads the n tasks sendAll delivers, failing the test if they do not all come within a
// generous deadline: Send blocked.
func collect(t *testing.T, tasks <-chan *a2a.Task, n int, while string) []*a2a.Task {
	t.Helper()
	var got []*a2a.Task
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case task, ok := <-tasks:
			if !ok {
				t.Fatalf("Send failed after %d of %d tasks %s", len(got), n, while)
			}
			if task.Status.State != a2a.TaskStateRejected || status(task) != BusyMessage {
				t.Fatalf("task %d sent %s: %s %q, want rejected as busy", len(got), while, task.Status.State, status(task))
			}
			got = append(got, task)
		case <-deadline:
			t.Fatalf("only %d of %d rejections were answered %s: Send waits for the store", len(got), n, while)
		}
	}
	return got
}

// A rejection is answered while the session's lock is held and the store's writer is stuck in a write
// that does not finish: it waits neither for that lock nor for the disk, and GetTask finds it meanwhile.
// (The running task's end no longer holds the lock across its write: the test holds both itself.)
func TestRejectionDoesNotWaitForAStoreWrite(t *testing.T) {
	s, running, release := busySession(t)
	st := s.cfg.Store.(*store.Store)
	unlock := holdWriteLock(t, st)
	s.mu.Lock()
	var once sync.Once
	letGo := func() { once.Do(s.mu.Unlock) }
	t.Cleanup(letGo) // before the session's cleanup, even when the test fails

	tasks := collect(t, sendAll(s.Session, 20), 20, "while the session's lock is held and a store write does not finish")
	got, err := s.Get(context.Background(), tasks[19].ID, nil, store.OperatorScope())
	if err != nil || got.Status.State != a2a.TaskStateRejected {
		t.Errorf("GetTask of a rejection before it is written: %+v %v", got, err)
	}
	letGo()
	unlock()
	release()
	if task := waitForState(t, s.Session, running.ID, a2a.TaskStateCompleted); answer(task) != "done" {
		t.Errorf("the running task ended %q", answer(task))
	}
	waitStored(t, st, a2a.TaskStateRejected, 20)
}

// Rejections are stored in a batch, one transaction without an fsync for many of them, never one
// synced insert each.
func TestRejectionsAreStoredInOneBatch(t *testing.T) {
	s, _, _ := busySession(t)
	st := s.cfg.Store.(*store.Store)
	var mu sync.Mutex
	writes := map[string][]int{}
	st.SetWriteHook(func(op string, rows int) {
		mu.Lock()
		writes[op] = append(writes[op], rows)
		mu.Unlock()
	})
	unlock := holdWriteLock(t, st) // the store is busy with a long write while the rejections come
	collect(t, sendAll(s.Session, 100), 100, "while the store's write lock is held")
	unlock()
	waitStored(t, st, a2a.TaskStateRejected, 100)
	mu.Lock()
	defer mu.Unlock()
	if len(writes["create"]) != 0 || len(writes["batch"]) != 1 || writes["batch"][0] != 100 {
		t.Errorf("100 rejections were written as %v, want one batch of 100", writes)
	}
	if synchronous, err := st.WriteSynchronous(); err != nil || synchronous != 2 {
		t.Errorf("after a batch the write connection's synchronous is %d (%v), want 2 (FULL)", synchronous, err)
	}
}

// Beyond the batch writer's buffer a rejection is answered and counted but not kept: GetTask answers
// task-not-found for it.
func TestRejectionsBeyondTheBufferAreNotKept(t *testing.T) {
	s, _, _ := busySession(t)
	st := s.cfg.Store.(*store.Store)
	const n = store.BatchMaxRows + 5
	unlock := holdWriteLock(t, st)
	tasks := collect(t, sendAll(s.Session, n), n, "while the store's write lock is held")
	unlock()
	waitStored(t, st, a2a.TaskStateRejected, store.BatchMaxRows)
	for i, task := range tasks {
		_, err := s.Get(context.Background(), task.ID, nil, store.OperatorScope())
		switch kept := i < store.BatchMaxRows; {
		case kept && err != nil:
			t.Errorf("rejection %d, within the buffer: %v", i, err)
		case !kept && !errors.Is(err, a2a.ErrTaskNotFound):
			t.Errorf("rejection %d, beyond the buffer: GetTask answered %v, want task not found", i, err)
		}
	}
	if got := testutil.ToFloat64(s.cfg.Metrics.TasksTotal.WithLabelValues(string(a2a.TaskStateRejected))); got != n {
		t.Errorf("mur_tasks_total{state=rejected} = %v, want %d", got, n)
	}
}

// A task admitted while Close runs ends canceled once it is stored, and Close waits for it.
func TestCloseEndsATaskStillBeingStored(t *testing.T) {
	// A task whose push config is registered once it is stored waits for its creation to be durable
	// before it may start; any other may start as soon as its creation is handed to the store, and so
	// may be running when Close comes.
	t.Run("waits for its creation", func(t *testing.T) {
		closeWhileStored(t, "[cat]", Origin{Stored: func(*a2a.Task) error { return nil }}, []string{"task_end", "session_end"})
	})
	t.Run("starts at once", func(t *testing.T) {
		// It runs until Close cancels it.
		closeWhileStored(t, "[sleep, '30']", Origin{}, []string{"task_start", "task_end", "session_end"})
	})
}

// closeWhileStored closes a session running command while the store is committing the creation of a
// task from origin, and checks the task's records, up to the session's end, are want, and that it ends
// canceled.
func closeWhileStored(t *testing.T, command string, origin Origin, want []string) {
	s := newSession(t, map[string]string{"murmur.yaml": "name: s\nscript: {command: " + command + "}\ntask_acceptance: queue\n"})
	st := s.cfg.Store.(*store.Store)
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once, unblocked sync.Once
	let := func() { unblocked.Do(func() { close(unblock) }) }
	t.Cleanup(let)
	setWriteHook(st, func(op string, rows int) {
		if op == "create" {
			once.Do(func() { close(entered); <-unblock })
		}
	})
	sent := make(chan *a2a.Task, 1)
	go func() {
		task, err := s.Send(context.Background(), userMsg("late"), origin)
		if err != nil {
			t.Error(err)
		}
		sent <- task
	}()
	<-entered
	if want[0] == "task_start" {
		// It starts while its creation is still being committed.
		for !slices.ContainsFunc(readTrace(t, s.Session), func(r map[string]any) bool { return r["type"] == "task_start" }) {
			time.Sleep(time.Millisecond)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	for !s.admit.Refused() {
		time.Sleep(time.Millisecond) // until Close has begun
	}
	let()
	task := <-sent
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// Close waited for the task: its end is recorded before the session's.
	var order []string
	for _, r := range readTrace(t, s.Session) {
		if r["task"] == string(task.ID) || r["type"] == "session_end" {
			order = append(order, r["type"].(string))
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", order, want)
	}
	got, err := s.Get(context.Background(), task.ID, nil, store.OperatorScope())
	if err != nil || got.Status.State != a2a.TaskStateCanceled || status(got) != ShutdownCancel {
		t.Errorf("the task stored while Close ran: %+v %v, want canceled with %q", got, err, ShutdownCancel)
	}
}
