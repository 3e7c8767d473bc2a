package member

import (
	"context"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/admit"
)

// Send takes a message. Without a taskId it creates a task and returns it as acknowledged:
// TASK_STATE_SUBMITTED, stored with an fsync before Send returns (it runs as soon as the session is
// free, in order of admission, and may start before its creation is durable: createEarly), or
// TASK_STATE_REJECTED when the session is busy (and does not queue, or its queue is full), closed or
// past its deadline. A rejection is decided without the session's lock and waits for no disk: the store
// keeps it later, in a batch (Store.CreateBatched), or not at all when the batch writer's buffer is full.
// A contextId continues that conversation of the sender's (DESIGN §15). A message naming an existing
// task answers its question when it waits for its sender (TASK_STATE_INPUT_REQUIRED) and is refused
// otherwise. A message whose messageId the same caller already sent is answered with the task it
// created, as it stands (a retry is safe); one that was rejected is offered again.
func (s *Session) Send(ctx context.Context, msg *a2a.Message, origin Origin) (*a2a.Task, error) {
	if msg.TaskID != "" {
		return s.talk.FollowUp(ctx, msg, scopeOf(origin))
	}
	if origin.Trust == "" {
		origin.Trust = TrustTrusted
	}
	if origin.Origin == "" {
		origin.Origin = OriginOperator
	}
	now := s.cfg.Now()
	t, err := s.newTask(ctx, msg, origin, now)
	if err != nil {
		return nil, err
	}
	if sent, ok, err := s.retries.Find(ctx, t, msg); ok || err != nil { // a retry, answered as Send says
		if ok && origin.Retried != nil {
			origin.Retried(sent)
		}
		return sent, err
	}
	switch a := s.side.Admit(ctx, t, origin.Retried); {
	case a.Handed:
		return a.Answer, a.Err
	case !a.Placed:
		return s.reject(t, a.Refusal, now), nil
	}
	stored, answer, err := s.enqueue(ctx, t, msg, origin, now)
	if stored == nil {
		return answer, err
	}
	defer stored()
	return s.create(ctx, t, origin)
}

// newTask is the task msg creates, submitted at now by origin: in a new context, or in the one msg names
// when its sender may continue it.
func (s *Session) newTask(ctx context.Context, msg *a2a.Message, origin Origin, now time.Time) (*a2a.Task, error) {
	id := a2a.TaskID(ids.New(ids.PrefixTask))
	contextID := msg.ContextID
	if contextID == "" {
		contextID = ids.New(ids.PrefixContext)
	} else if err := s.talk.CheckContext(ctx, contextID, origin.Caller); err != nil {
		return nil, err
	}
	in := *msg
	in.TaskID, in.ContextID = id, contextID
	meta := ids.NewMeta(map[ids.MetaKey]any{ids.MetaMember: s.cfg.Member, ids.MetaTrust: string(origin.Trust), ids.MetaOrigin: string(origin.Origin)})
	if origin.Origin == OriginPeer {
		ids.Set(meta, ids.MetaCaller, origin.Caller)
	}
	return &a2a.Task{
		ID:        id,
		ContextID: contextID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: a2a.NewTimestamp(now)},
		History:   []a2a.Message{in},
		Metadata:  map[string]any{ids.Meta: meta},
	}, nil
}

// enqueue puts t, admitted, at the end of the queue now, so the queue stays in order of admission; the
// executor starts it once it is stored (create). stored, which Send calls once create has returned,
// lets go of t's hold on its message and lets Close go on. When t is not queued, stored is nil and
// Send answers with answer and err: t rejected as Close or the deadline came between its admission and
// here, or the task of a copy of its message that arrived while that copy was being stored.
func (s *Session) enqueue(ctx context.Context, t *a2a.Task, msg *a2a.Message, origin Origin, now time.Time) (stored func(), answer *a2a.Task, err error) {
	s.mu.Lock()
	if s.closed || s.expired {
		// The refusal that Close or the deadline set says which.
		s.mu.Unlock()
		s.admit.Release()
		refusal, _ := s.admit.Take()
		return nil, s.reject(t, refusal, now), nil
	}
	held, release, heldErr := s.retries.Hold(t, msg)
	if release == nil {
		s.mu.Unlock()
		s.admit.Release()
		if heldErr == nil && origin.Retried != nil {
			origin.Retried(held)
		}
		return nil, held, heldErr
	}
	s.tasks.Hold(t.ID, now)
	s.tasks.Add(t.ID, msg.ContextID != "", false)
	s.trc.Keep(ctx, t.ID, s.tasks.IDs()) // its run continues the trace of the request that sent it
	s.cfg.Metrics.TasksActive.Inc()
	s.storing.Add(1)
	s.mu.Unlock()
	return func() {
		s.storing.Done()
		release()
	}, nil, nil
}

// create stores t, queued by enqueue, and answers Send: once stored, the executor may start it. A task
// the store refused leaves the session (a retry that raced its first copy at another replica is
// answered with that copy's task); one that Close or the deadline took out of the queue while it was
// being stored ends as the tasks queued then did.
func (s *Session) create(ctx context.Context, t *a2a.Task, origin Origin) (*a2a.Task, error) {
	if lc, ok := s.cfg.Store.(laterCreator); ok && origin.Stored == nil && !origin.Streamed && !s.side.Replicated() {
		return s.createEarly(ctx, t, lc)
	}
	err := s.cfg.Store.Create(ctx, t)
	sentBefore := s.side.SentBefore(ctx, t, err)
	var storedErr error
	if err == nil && origin.Stored != nil {
		storedErr = origin.Stored(t) // the task is still unstored to the executor: it cannot start yet
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if answer, err, done := s.unqueuedLocked(ctx, t, origin, s.tasks.Stored(t.ID), err, sentBefore); done {
		return answer, err
	}
	s.changedLocked(t)
	s.kickLocked()
	return t, storedErr
}

// laterCreator is a store that hands a creation over without waiting for it (store.Store).
type laterCreator interface {
	CreateLater(ctx context.Context, t *a2a.Task) (wait func() error)
}

// createEarly stores t as create does, but the executor may start t as soon as it is handed to the
// store, before its creation is durable; Send still returns only once it is. A task that ends before the
// store's committer takes its creation is inserted once, ended (store.CreateLater): its creation and its
// end share one row and one fsync. A creation that fails once the task is queued is Send's error, and
// the task runs all the same, its writes failing as its creation did. Not for a task whose push config
// must exist before it starts (origin.Stored) or whose stream must open with it SUBMITTED
// (origin.Streamed), nor on replicas, where the creation decides which replica took the message.
func (s *Session) createEarly(ctx context.Context, t *a2a.Task, lc laterCreator) (*a2a.Task, error) {
	wait := lc.CreateLater(ctx, t)
	s.mu.Lock()
	queued := s.tasks.Stored(t.ID)
	if queued {
		s.changedLocked(t)
		s.kickLocked()
	}
	s.mu.Unlock()
	err := wait()
	if queued {
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	answer, err, _ := s.unqueuedLocked(ctx, t, Origin{}, false, err, nil)
	return answer, err
}

// unqueuedLocked ends create for t when it is not to run: the store refused it, or it was not queued
// any more once stored. done is false when t is stored and queued, to run. s.mu is held.
func (s *Session) unqueuedLocked(ctx context.Context, t *a2a.Task, origin Origin, queued bool, err error, sentBefore *a2a.Task) (answer *a2a.Task, _ error, done bool) {
	if err != nil {
		s.tasks.Drop(t.ID)
		s.cfg.Metrics.TasksActive.Dec()
		s.admit.Release()
		s.kickLocked()
		if sentBefore != nil {
			if origin.Retried != nil {
				origin.Retried(sentBefore)
			}
			return sentBefore, nil, true
		}
		return nil, err, true
	}
	if !queued {
		state, text := a2a.TaskStateCanceled, ShutdownCancel
		if s.expired {
			state, text = a2a.TaskStateFailed, fmt.Sprintf(DeadlineFail, s.deadline.UTC().Format(time.RFC3339))
		}
		if ferr := s.finishLocked(context.WithoutCancel(ctx), s.endOf(state, text, nil), t); ferr != nil {
			s.log.Error("storing the end of a task the session ended while it was stored", "task", t.ID, "err", ferr)
		}
		return t, nil, true
	}
	return nil, nil, false
}

// reject ends t rejected with r's text and hands it to the store's batch writer: a rejection takes no
// lock and waits for no disk. When the writer's buffer is full the rejection is answered but not kept.
// A task rejected for want of room carries metadata.murmur.busy: a calling member offers it again on
// that mark, never on the text (SPEC "A busy member").
func (s *Session) reject(t *a2a.Task, r admit.Refusal, now time.Time) *a2a.Task {
	if r.Busy {
		ids.Set(ids.Murmur(t.Metadata), ids.MetaBusy, true)
	}
	s.setStatus(t, a2a.TaskStateRejected, r.Text, now)
	s.cfg.Store.CreateBatched(t)
	s.cfg.Metrics.TasksTotal.WithLabelValues(string(a2a.TaskStateRejected)).Inc()
	s.cfg.Metrics.TaskDuration.WithLabelValues(string(a2a.TaskStateRejected)).Observe(0)
	return t
}
