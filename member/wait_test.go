package member

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// readsCounted counts the reads of one task's JSON that a session makes of its store.
type readsCounted struct {
	store.Tasks
	mu    sync.Mutex
	reads map[a2a.TaskID]int
}

func (c *readsCounted) GetInScope(ctx context.Context, id a2a.TaskID, sc store.Scope) ([]byte, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.Tasks.GetInScope(ctx, id, sc)
}

func (c *readsCounted) of(id a2a.TaskID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// A blocking wait reads nothing of the store while the session holds the task running (it is told of
// the task's end), and reads the task once it is settled: the wait is answered with the stored end.
func TestWaitReadsTheStoreOnceTheTaskIsSettled(t *testing.T) {
	counted := &readsCounted{reads: map[a2a.TaskID]int{}}
	s, _ := startSession(t, map[string]string{"murmur.yaml": "name: s\nscript:\n  command: [sh, -c, 'while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; echo done']\ntask_acceptance: queue\n"},
		sessionOpts{wrap: func(st store.Tasks) store.Tasks { counted.Tasks = st; return counted }})
	ctx := context.Background()
	task, err := s.Send(ctx, &a2a.Message{MessageID: "m1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("x")}}, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	type waited struct {
		body []byte
		err  error
	}
	done := make(chan waited, 1)
	go func() {
		body, err := s.WaitJSON(ctx, task.ID)
		done <- waited{body, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		// The test reads around the count: only the wait's reads are counted.
		if got, err := counted.Tasks.Get(ctx, task.ID); err == nil && got.Status.State == a2a.TaskStateWorking {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the task did not start: %v, %v", got, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := counted.of(task.ID); n != 0 {
		t.Errorf("the wait read the queued or running task %d times", n)
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Capsule.Dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := <-done
	if w.err != nil {
		t.Fatal(w.err)
	}
	if state, err := store.StateOf(task.ID, w.body); err != nil || state != a2a.TaskStateCompleted {
		t.Errorf("the wait answered %s (%v), want the completed task", w.body, err)
	}
	if n := counted.of(task.ID); n != 1 {
		t.Errorf("the wait read the task %d times after it ran, want once: its end", n)
	}
}
