package member

import (
	"context"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Wait blocks until the task reaches a terminal or interrupted state, or ctx ends, and returns the task
// as it then stands.
func (s *Session) Wait(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	body, err := s.WaitJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	return store.Decode(id, body)
}

// WaitJSON is Wait answering the task as its stored JSON, which the caller must not modify
// (events.Signals.Wait): while the session holds the task and it is neither interrupted nor settled, its
// store is not read.
func (s *Session) WaitJSON(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	return s.waiters.Wait(ctx, id, s.holder)
}

// readTask is the stored JSON of task id, in the operator's scope.
func (s *Session) readTask(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	return s.cfg.Store.GetInScope(ctx, id, store.OperatorScope())
}

// unsettledHere reports whether the session holds task id and will tell its waiters (Notify, under
// s.mu) before the store can show it terminal or interrupted: it is queued, it runs and asks no one, or
// its end waits to be settled. A replica's tasks are another replica's to run as well: always read.
func (s *Session) unsettledHere(id a2a.TaskID) bool {
	if s.side.Replicated() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tasks.Holds(id) {
		return false
	}
	if r := s.tasks.Running(); r != nil && r.ID == id && r.Task != nil {
		st := r.Task.Status.State
		return !st.Interrupted() && !st.Terminal()
	}
	return true
}

// awaitSettled returns once the end of task id, which the store shows, has been settled (settle): the task
// has left the session and its records are written. A waiter that read the end from
// the store in the moment between its commit and its settling would otherwise see a session that still
// holds the task.
func (s *Session) awaitSettled(ctx context.Context, id a2a.TaskID) {
	s.mu.Lock()
	r := s.tasks.Handed(id)
	s.mu.Unlock()
	if r != nil {
		select {
		case <-r.Done:
		case <-ctx.Done():
		}
	}
}
