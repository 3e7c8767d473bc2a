package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// laterCreator is a store whose creation can be handed over without waiting for it (both stores; a
// session starts a task on it before its creation is durable).
type laterCreator interface {
	CreateLater(ctx context.Context, t *a2a.Task) (wait func() error)
}

// testCreateLater: a task CreateLater hands over is read at once, the writes of its run that follow are
// committed after it, in order, whether or not the writer took the creation before them, and its
// creation's wait returns once it is committed. EndAll and UpdateAll find a task whose creation is
// handed over and not waited for; a second creation under a stored id fails at its wait.
func testCreateLater(t *testing.T, open opener) {
	s := open(t)
	lc, ok := s.(laterCreator)
	if !ok {
		t.Skip("the store has no CreateLater")
	}
	t.Run("a run before its creation is waited for", func(t *testing.T) {
		created := lc.CreateLater(t.Context(), stepTask(1, a2a.TaskStateSubmitted, 0))
		checkStored(t, s, stepTask(1, a2a.TaskStateSubmitted, 0), "after CreateLater")
		s.UpdateSoon(stepTask(1, a2a.TaskStateWorking, 1))
		ended := s.UpdateLater(t.Context(), stepTask(1, a2a.TaskStateCompleted, 9))
		for _, wait := range []func() error{created, ended} {
			if err := wait(); err != nil {
				t.Fatal(err)
			}
		}
		checkStored(t, s, stepTask(1, a2a.TaskStateCompleted, 9), "after the waits")
		if got, err := s.GetByMessage(t.Context(), "", "msg_in_01"); err != nil || got.ID != taskID(1) {
			t.Errorf("GetByMessage = %v, %v; want %s", got, err, taskID(1))
		}
		listed(t, s, 1)
	})
	t.Run("UpdateAll and EndAll", func(t *testing.T) {
		created := []func() error{
			lc.CreateLater(t.Context(), task(2, "ctx", a2a.TaskStateSubmitted)),
			lc.CreateLater(t.Context(), task(3, "ctx", a2a.TaskStateSubmitted)),
		}
		if errs := s.UpdateAll(t.Context(), []*a2a.Task{task(2, "ctx", a2a.TaskStateCanceled)}); errs[0] != nil {
			t.Errorf("UpdateAll: %v", errs[0])
		}
		now := epoch.Add(time.Hour)
		if ids, err := s.EndAll(t.Context(), []a2a.TaskID{taskID(3)}, a2a.TaskStateCanceled, "bye", now); err != nil || len(ids) != 1 {
			t.Errorf("EndAll = %v, %v; want %s ended", ids, err, taskID(3))
		}
		for _, wait := range created {
			if err := wait(); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []a2a.TaskID{taskID(2), taskID(3)} {
			if got := get(t, s, id); got.Status.State != a2a.TaskStateCanceled {
				t.Errorf("%s is %s, want canceled", id, got.Status.State)
			}
		}
	})
	t.Run("an id stored already", func(t *testing.T) {
		if err := lc.CreateLater(t.Context(), task(1, "ctx", a2a.TaskStateSubmitted))(); err == nil {
			t.Error("a second creation of tsk_01 was stored")
		}
		checkStored(t, s, stepTask(1, a2a.TaskStateCompleted, 9), "after a second creation failed")
	})
	if err := lc.CreateLater(canceled(), task(4, "ctx", a2a.TaskStateSubmitted))(); err == nil {
		t.Error("CreateLater with an ended context stored the task")
	}
	if _, err := s.Get(t.Context(), taskID(4)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a task whose CreateLater's context had ended: %v, want not found", err)
	}
}

// canceled is a context that has ended.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
