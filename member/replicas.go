package member

import (
	"context"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/replica"
)

// A session's side of its member's replicas (DESIGN §16) is package replica's Side, which the session
// builds in Start and calls; what follows is the session's own state it changes, each under s.mu, as
// the callbacks of its replica.SideConfig.

// Replica is the session's side of its member's replicas, as the replica's Coordinator drives it.
func (s *Session) Replica() replica.Session { return s.side }

// idle reports whether the session runs no task and queues none (replica.SideConfig.Idle).
func (s *Session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks.Idle()
}

// adopt queues t, a task another replica offered that the session's Side claimed, as if it had been
// sent here (replica.SideConfig.Queue).
func (s *Session) adopt(ctx context.Context, t *a2a.Task) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks.Hold(t.ID, s.cfg.Now())
	s.cfg.Metrics.TasksActive.Inc()
	if s.closed || s.expired {
		// Claimed as the session ended: it ends as the tasks queued then did (finishLocked gives its
		// place back).
		return false, s.finishLocked(context.WithoutCancel(ctx), s.endOf(a2a.TaskStateCanceled, ShutdownCancel, nil), t)
	}
	// Whether its sender named a context is known only to the replica it was sent to: an adopted task
	// reads its context's earlier tasks, which a new context has none of.
	s.tasks.Add(t.ID, true, true)
	s.trc.Keep(ctx, t.ID, s.tasks.IDs()) // its run continues the trace of the request that sent it, at whichever replica
	s.kickLocked()
	return true, nil
}

// changed tells t's waiters and streams of a change another replica committed
// (replica.SideConfig.Changed).
func (s *Session) changed(t *a2a.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changedLocked(t)
}

// releaseQueuedLocked gives the stored queued tasks to the other replicas when the session closes (not
// at its deadline, which ends them): they leave the session (replica.Side.Release). What could not be
// released is left queued, for Close to cancel. s.mu is held.
func (s *Session) releaseQueuedLocked(ctx context.Context) error {
	if s.expired {
		return nil
	}
	gone, err := s.side.Release(ctx, s.tasks.Queued())
	if len(gone) > 0 {
		s.tasks.Drop(gone...)
		s.cfg.Metrics.TasksActive.Sub(float64(len(gone)))
	}
	return err
}

// goneElsewhere reports whether the session has closed without holding task id: a task another replica
// runs, or one this one released as it closed. Its waiters here return it as it stands, since no
// notice of its changes reaches a closed replica.
func (s *Session) goneElsewhere(id a2a.TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed && s.side.Replicated() && !s.tasks.Holds(id)
}
