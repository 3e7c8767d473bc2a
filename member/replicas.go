package member

import (
	"context"
	"errors"
	"slices"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/share"
	"github.com/murmur-run/murmur/member/store"
)

// Replicas is what a session on one of its member's replicas (DESIGN §16) asks of the others, through
// the store they share (package member/replica): nil for a member of one process.
type Replicas interface {
	// Offer stores t, a new task this replica has no place for, for another replica to claim: false
	// when no live replica has a place either (the task is then rejected as busy).
	Offer(ctx context.Context, t *a2a.Task, perReplica int) (bool, error)
	// Cancel cancels task id, which this replica neither runs nor queues: it asks its owner, or ends it
	// itself when nobody runs it; done with the ended task then. Not done: the caller waits for its end.
	Cancel(ctx context.Context, id a2a.TaskID) (t *a2a.Task, done bool, err error)
	// Release gives the tasks of ids, queued here and not started, to the other replicas: the ids it
	// gave.
	Release(ctx context.Context, ids []a2a.TaskID) ([]a2a.TaskID, error)
	// Forward hands a follow-up to a task that waits for input at another replica (converse.Config.Forward).
	Forward(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (taken bool, refusal string, err error)
}

// Adopt gives the session a task another replica took (or one that lost its replica), if it has a place:
// claim takes the task from the store once the place is held, and the task is queued as if sent here.
// It reports whether a task was adopted.
func (s *Session) Adopt(ctx context.Context, claim func(context.Context) (*a2a.Task, error)) (bool, error) {
	if _, ok := s.admit.Take(); !ok {
		return false, nil
	}
	t, err := claim(ctx)
	if t == nil || err != nil {
		s.admit.Release()
		return false, err
	}
	sent := s.sentTrace(ctx, t.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submitted[t.ID] = s.cfg.Now()
	s.cfg.Metrics.TasksActive.Inc()
	if s.closed || s.expired {
		// Claimed as the session ended: it ends as the tasks queued then did (finishLocked gives its
		// place back).
		return false, s.finishLocked(context.WithoutCancel(ctx), s.endOf(a2a.TaskStateCanceled, ShutdownCancel, nil), t)
	}
	s.queue = append(s.queue, t.ID)
	s.trc.Keep(sent, t.ID, s.queue) // its run continues the trace of the request that sent it, at whichever replica
	// Whether its sender named a context is known only to the replica it was sent to: an adopted task
	// reads its context's earlier tasks, which a new context has none of.
	s.continuing[t.ID] = true
	s.kickLocked()
	return true, nil
}

// traceKeeper is the store the member's replicas share as Adopt reads it: the traceparent of the request
// that sent a task, kept with it (the PostgreSQL store).
type traceKeeper interface {
	Traceparent(ctx context.Context, id a2a.TaskID) (string, error)
}

// sentTrace is ctx within the trace context of the request that sent task id to another replica, as the
// shared store keeps it; ctx as it is when it keeps none (DESIGN §17: a task another replica claims
// runs in the trace of the request that sent it).
func (s *Session) sentTrace(ctx context.Context, id a2a.TaskID) context.Context {
	k, ok := s.cfg.Store.(traceKeeper)
	if !ok {
		return ctx
	}
	tp, err := k.Traceparent(ctx, id)
	if err != nil {
		s.log.Warn("reading the trace context of a task another replica stored; its run starts a trace of its own", "task", id, "err", err)
		return ctx
	}
	return conv.ContextWithTraceparent(ctx, tp)
}

// Idle reports whether the session runs no task and queues none: a replica claims a task another
// replica offered only then, so that offered tasks run where they start at once.
func (s *Session) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running == nil && len(s.queue) == 0
}

// Free is how many more tasks the session would take now: run or queue.
func (s *Session) Free() int { return s.admit.Free() }

// Remote tells the task's waiters and streams of a change another replica committed; nothing is stored.
func (s *Session) Remote(ctx context.Context, id a2a.TaskID) {
	if !s.waiters.Watched(id) && !events.Wants(s.cfg.Events, id) {
		return
	}
	t, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		s.log.Warn("reading a task another replica changed", "task", id, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changedLocked(t)
}

// Resync wakes every Wait to read its task again: a change another replica committed may have gone
// untold (a lost notification).
func (s *Session) Resync() { s.waiters.NotifyAll() }

// Asks reports whether task id waits here for its sender's input.
func (s *Session) Asks(id a2a.TaskID) bool {
	_, ok := s.waiter.Question(id)
	return ok
}

// Asking lists the tasks that wait here for their sender's input.
func (s *Session) Asking() []a2a.TaskID { return s.waiter.Tasks() }

// Deliver hands msg, a follow-up another replica forwarded, to the question task id waits on here:
// waiting is false when it waits on none; err says why msg does not answer it (the task keeps waiting).
func (s *Session) Deliver(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (waiting bool, err error) {
	err = s.waiter.Deliver(ctx, id, msg)
	if errors.Is(err, converse.ErrNotWaiting) {
		return false, nil
	}
	return true, err
}

// releaseQueuedLocked gives the stored queued tasks to the other replicas when the session closes (not
// at its deadline, which ends them): they leave the session, and their waiters here return the task as
// it stands, for its sender to follow at any replica, as do the waiters of tasks other replicas run.
// What could not be released is left queued, for Close to cancel. s.mu is held.
func (s *Session) releaseQueuedLocked(ctx context.Context) error {
	if s.cfg.Replicas == nil || s.expired {
		return nil
	}
	ids, err := s.cfg.Replicas.Release(ctx, s.queuedIDsLocked())
	if len(ids) == 0 {
		s.waiters.NotifyAll()
		return err
	}
	gone := make(map[a2a.TaskID]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
		s.admit.Release()
		delete(s.continuing, id)
		delete(s.submitted, id)
		s.waiters.Notify(id)
	}
	s.queue = slices.DeleteFunc(s.queue, func(id a2a.TaskID) bool { return gone[id] })
	s.waiters.NotifyAll() // the waits on tasks other replicas run learn that no notice will come
	s.cfg.Metrics.TasksActive.Sub(float64(len(ids)))
	s.log.Info("released the queued tasks to the member's other replicas", "count", len(ids))
	return err
}

// goneElsewhere reports whether the session has closed without holding task id: a task another replica
// runs, or one this one released as it closed. Its waiters here return it as it stands, since no
// notice of its changes reaches a closed replica.
func (s *Session) goneElsewhere(id a2a.TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.submitted[id]
	return s.closed && s.cfg.Replicas != nil && !held
}

// sentBefore is the task a copy of t's message made at another replica, when storing t failed for
// that (store.ErrSentBefore): the answer to a retry that raced its first copy.
func (s *Session) sentBefore(ctx context.Context, t *a2a.Task, err error) *a2a.Task {
	if !errors.Is(err, store.ErrSentBefore) {
		return nil
	}
	sent, gerr := s.cfg.Store.GetByMessage(ctx, store.TaskCaller(t), store.FirstMessageID(t))
	if gerr != nil {
		return nil
	}
	return sent
}

// offered is Send's answer for t, which it offered to the other replicas: t, or the task a copy of its
// message made first at another replica, or the offer's error.
func (s *Session) offered(ctx context.Context, t *a2a.Task, err error, origin Origin) (*a2a.Task, error) {
	if sent := s.sentBefore(ctx, t, err); sent != nil {
		if origin.Retried != nil {
			origin.Retried(sent)
		}
		return sent, nil
	}
	return t, err
}

// peerFileKeeper is the store the member's replicas share (the PostgreSQL store) as the keeper of the
// files share-file shares, which the door of any replica then serves; nil for a member of one process,
// whose door serves its export root.
func peerFileKeeper(cfg Config) share.PeerFileKeeper {
	if cfg.Replicas == nil {
		return nil
	}
	k, _ := cfg.Store.(share.PeerFileKeeper)
	return k
}
