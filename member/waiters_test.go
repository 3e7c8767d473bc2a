package member

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-run/murmur/a2a"
)

// A task's change wakes the waiters of that task and no other, and leaves nothing behind.
func TestTaskSignalsWakeOnlyTheirTask(t *testing.T) {
	var ts taskSignals
	a1, a2, b := ts.watch("a"), ts.watch("a"), ts.watch("b")
	ts.notify("a")
	for i, sg := range []*taskSignal{a1, a2} {
		select {
		case <-sg.ch:
		default:
			t.Errorf("waiter %d of task a was not woken by its change", i)
		}
	}
	select {
	case <-b.ch:
		t.Error("task a's change woke task b's waiter")
	default:
	}
	ts.unwatch("a", a1)
	ts.unwatch("a", a2)
	ts.unwatch("b", b)
	if len(ts.m) != 0 {
		t.Errorf("%d signals left after every waiter left", len(ts.m))
	}
}

// Closing a session with many queued tasks ends them all canceled, stored in one transaction.
func TestCloseCancelsQueuedTasksInOneTransaction(t *testing.T) {
	s := newSession(t, map[string]string{"murmur.yaml": strings.Replace(gatedCapsule, "\n", "\ntask_acceptance: queue\nqueue_size: 1000\n", 1)})
	ctx := context.Background()
	running, err := s.Send(ctx, userMsg("work"), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	waitForState(t, s.Session, running.ID, a2a.TaskStateWorking)
	const n = 300
	queued := make([]a2a.TaskID, n)
	for i := range queued {
		task, err := s.Send(ctx, userMsg(fmt.Sprintf("queued %d", i)), Origin{})
		if err != nil || task.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("queued task %d: %+v %v", i, task, err)
		}
		queued[i] = task.ID
	}
	st := s.cfg.Store
	var mu sync.Mutex
	var updates []int
	st.SetWriteHook(func(op string, rows int) {
		mu.Lock()
		defer mu.Unlock()
		if op == "update" {
			updates = append(updates, rows)
		}
	})
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(updates) == 0 || updates[0] != n {
		t.Errorf("closing wrote updates of %v rows, want the %d queued tasks in the first", updates, n)
	}
	mu.Unlock()
	for _, id := range queued {
		task, err := st.Get(ctx, id)
		if err != nil || task.Status.State != a2a.TaskStateCanceled || status(task) != ShutdownCancel {
			t.Fatalf("queued task %s after Close: %+v %v", id, task, err)
		}
	}
}
