package member

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

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
	st := s.cfg.Store.(*store.Store)
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
