package member

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/store"
)

// The executor starts the next task while the previous task's end waits for its commit, and the end is
// seen (in the store, by Wait, by Cancel) only once it is durable: with the store's writer held, the
// first task's end stays invisible while the second task runs; let go, both end completed, their
// task_end records in the order they ran.
func TestNextTaskRunsWhileTheEndCommits(t *testing.T) {
	s := newSession(t, map[string]string{"murmur.yaml": "name: s\ntask_acceptance: queue\nscript:\n  command: [sh, -c, 'read x; if [ \"$x\" = first ]; then while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; fi; echo \"got $x\"']\n"})
	ctx := context.Background()
	send := func(text string) a2a.TaskID {
		task, err := s.Send(ctx, &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}, Origin{})
		if err != nil || task.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("Send %q: %+v %v", text, task, err)
		}
		return task.ID
	}
	first, second := send("first"), send("second")
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.Get(ctx, first, nil, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State == a2a.TaskStateWorking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first task never showed working: %s", got.Status.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	unlock := s.cfg.Store.(*store.Store).LockWrites()
	defer unlock()
	if err := os.WriteFile(filepath.Join(s.Capsule().Dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	started := func() bool {
		for _, r := range readTrace(t, s.Session) {
			if r["type"] == "task_start" && r["task"] == string(second) {
				return true
			}
		}
		return false
	}
	for !started() {
		if time.Now().After(deadline) {
			t.Fatal("the second task did not start while the first task's end waited for the disk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, err := s.Get(ctx, first, nil, store.OperatorScope())
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("the first task before its end is durable: %+v %v, want it still working", got, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if w, _ := s.Wait(short, first); w.Status.State.Terminal() {
		t.Errorf("Wait returned the first task %s before its end was durable", w.Status.State)
	}
	cancel()
	unlock()
	for i, id := range []a2a.TaskID{first, second} {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		got, err := s.Wait(wctx, id)
		cancel()
		want := []string{"got first", "got second"}[i]
		if err != nil || got.Status.State != a2a.TaskStateCompleted || answer(got) != want {
			t.Fatalf("task %d after the commit: %+v %v, want completed with %q", i, got, err, want)
		}
		if _, err := s.Cancel(ctx, id, store.OperatorScope()); err == nil {
			t.Errorf("canceling the completed task %d succeeded", i)
		}
	}
	var ends []string
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "task_end" {
			ends = append(ends, r["task"].(string))
		}
	}
	if len(ends) != 2 || ends[0] != string(first) || ends[1] != string(second) {
		t.Errorf("task_end records %v, want %s then %s", ends, first, second)
	}
}

// A task that has run gives back its place in the admission gate when its end is handed to the store,
// not once the end is durable: a member that takes no queue admits the next task while the last end is
// still being synced, and no client that has read an end is refused as busy for that task.
func TestPlaceIsFreeOnceTheEndIsHandedOver(t *testing.T) {
	s := newSession(t, map[string]string{"murmur.yaml": "name: s\nscript:\n  command: [sh, -c, 'read x; if [ \"$x\" = first ]; then while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; fi; echo \"got $x\"']\n"})
	ctx := context.Background()
	msg := func(text string) *a2a.Message {
		return &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}
	}
	first, err := s.Send(ctx, msg("first"), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	waitForState(t, s.Session, first.ID, a2a.TaskStateWorking)
	if busy, _ := s.Send(ctx, msg("too soon"), Origin{}); busy.Status.State != a2a.TaskStateRejected {
		t.Fatalf("a task sent while the first runs: %s, want rejected (the capsule takes no queue)", busy.Status.State)
	}
	unlock := s.cfg.Store.(*store.Store).LockWrites()
	defer unlock()
	if err := os.WriteFile(filepath.Join(s.Capsule().Dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		handed := s.tasks.Handed(first.ID) != nil
		s.mu.Unlock()
		if handed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first task's end was never handed to the store")
		}
	}
	sent := make(chan *a2a.Task, 1)
	go func() {
		task, err := s.Send(ctx, msg("second"), Origin{})
		if err != nil {
			t.Error(err)
		}
		sent <- task
	}()
	select {
	case task := <-sent:
		t.Fatalf("the second task was answered while the store could not write it: %s %q", task.Status.State, status(task))
	case <-time.After(100 * time.Millisecond): // admitted: its Create waits for the store
	}
	unlock()
	second := <-sent
	if second == nil || second.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("the second task: %+v, want it admitted", second)
	}
	for id, want := range map[a2a.TaskID]string{first.ID: "got first", second.ID: "got second"} {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		got, err := s.Wait(wctx, id)
		cancel()
		if err != nil || got.Status.State != a2a.TaskStateCompleted || answer(got) != want {
			t.Errorf("task %s: %+v %v, want completed with %q", id, got, err, want)
		}
	}
}
