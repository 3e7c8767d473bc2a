package replica

import (
	"context"
	"errors"
	"log/slog"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/admit"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/share"
	"github.com/murmur-run/murmur/member/store"
)

// Peers is what a Side asks of the member's other replicas, through the store they share: the
// Coordinator's side of it.
type Peers interface {
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

var (
	_ Peers   = (*Coordinator)(nil)
	_ Session = (*Side)(nil)
)

// SideConfig is what a session gives its Side: the parts of the session the Side reads, each safe for
// concurrent use, and the session's own work it calls back, each of which takes the session's lock.
type SideConfig struct {
	// Peers is the member's other replicas; nil for a member of one process, whose Side then only
	// admits (Admit is the gate's Take) and does nothing else.
	Peers  Peers
	Store  store.Tasks
	Gate   *admit.Gate      // the session's admission gate
	Waiter *converse.Waiter // the questions the session's tasks wait on for their sender
	Waits  *events.Signals  // what wakes the session's Waits
	Events events.Publisher // the session's streams and push; nil tells nobody
	Log    *slog.Logger

	// Idle reports whether the session runs no task and queues none.
	Idle func() bool
	// Queue queues t, a task another replica offered and Adopt claimed, as if it had been sent here, its
	// run continuing the trace ctx carries: false, with the error of storing its end, when the session
	// ended meanwhile (t then ends canceled, as the tasks queued then did).
	Queue func(ctx context.Context, t *a2a.Task) (bool, error)
	// Changed tells t's waiters and streams of a change another replica committed.
	Changed func(t *a2a.Task)
	// Cancel cancels a task the session runs or queues (member.Session.Cancel).
	Cancel func(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error)
}

// Side is a session's side of its member's replicas (DESIGN §16): what the session on one replica does
// that a member of one process does not. It places a new task here or offers it to the other replicas
// (Admit), takes the tasks they offer (Adopt), hands a follow-up to the replica whose task waits for it
// (converse.Config.Forward) and delivers the ones forwarded here (Deliver), gives its queue to the others
// when it closes (Release), and names the shared store as the keeper of peer and artifact files. The
// Coordinator drives it as its Session; the session calls the rest.
//
// A Side holds no state of its own: what it changes is the session's, through SideConfig. Its methods
// are safe for concurrent use, but Release, which the session calls holding its lock.
type Side struct {
	cfg SideConfig
}

// NewSide returns the Side of the session cfg describes.
func NewSide(cfg SideConfig) *Side { return &Side{cfg: cfg} }

// Replicated reports whether the member has other replicas.
func (s *Side) Replicated() bool { return s.cfg.Peers != nil }

// Admission is Admit's decision on a new task.
type Admission struct {
	Placed bool // the task holds a place in the session's admission gate
	// Handed: another replica took the task, or offering it failed. Send answers with Answer and Err:
	// the task, the one a copy of its message made first at another replica, or the offer's error.
	Handed bool
	Answer *a2a.Task
	Err    error
	// Refusal, when the task is neither placed nor handed, is why it is rejected.
	Refusal admit.Refusal
}

// Admit takes a place for t, a new task, in the session's admission gate, or offers t to the other
// replicas. retried is told when the answer is the task a copy of t's message made first.
func (s *Side) Admit(ctx context.Context, t *a2a.Task, retried func(*a2a.Task)) Admission {
	gate := s.cfg.Gate
	refusal, ok := gate.Take()
	if ok && s.Replicated() && !s.cfg.Idle() {
		// A place here is a wait behind this replica's tasks: offered, the task is claimed by the first
		// replica that is idle (this one too, once it is). Kept here when no replica has room.
		gate.Release()
		if offered, err := s.cfg.Peers.Offer(ctx, t, gate.Limit()); offered || err != nil {
			return s.offered(ctx, t, err, retried)
		}
		refusal, ok = gate.Take()
	}
	if !ok && !gate.Refused() && s.Replicated() {
		// Busy here: another replica may have a place; it claims the task from the store.
		if offered, err := s.cfg.Peers.Offer(ctx, t, gate.Limit()); offered || err != nil {
			return s.offered(ctx, t, err, retried)
		}
	}
	return Admission{Placed: ok, Refusal: refusal}
}

// offered is Admit's answer for t, which it offered to the other replicas: t, or the task a copy of its
// message made first at another replica, or the offer's error.
func (s *Side) offered(ctx context.Context, t *a2a.Task, err error, retried func(*a2a.Task)) Admission {
	if sent := s.SentBefore(ctx, t, err); sent != nil {
		if retried != nil {
			retried(sent)
		}
		return Admission{Handed: true, Answer: sent}
	}
	return Admission{Handed: true, Answer: t, Err: err}
}

// SentBefore is the task a copy of t's message made at another replica, when storing t failed for that
// (store.ErrSentBefore): the answer to a retry that raced its first copy. Nil otherwise.
func (s *Side) SentBefore(ctx context.Context, t *a2a.Task, err error) *a2a.Task {
	if !errors.Is(err, store.ErrSentBefore) {
		return nil
	}
	sent, gerr := s.cfg.Store.GetByMessage(ctx, store.TaskCaller(t), store.FirstMessageID(t))
	if gerr != nil {
		return nil
	}
	return sent
}

// Owns stores t's working state, durable and as this replica's, before the task runs here, and
// reports whether it may run. A replica whose lease lapsed (a slow machine, a pause) may have been
// reaped while t sat in its queue: its claim was released and another replica can claim and run t. The
// store refuses the write of a task the replica no longer owns (store.ErrNotOwner, or ErrNotFound), so
// a task runs on one replica only: the one whose working state was stored first, since a reap ends a
// working task failed instead of releasing it. Any other failure of the write (the database
// unreachable) runs the task as a member of one process does: its end's write reports it.
func (s *Side) Owns(ctx context.Context, t *a2a.Task) bool {
	err := s.cfg.Store.UpdateLater(ctx, t)()
	switch {
	case err == nil:
		return true
	case !errors.Is(err, store.ErrNotOwner) && !errors.Is(err, store.ErrNotFound):
		s.cfg.Log.Error("the task store could not store a task's progress", "task", t.ID, "err", err)
		return true
	}
	s.cfg.Log.Warn("a replica let a task go unrun: its working state could not be stored under this replica", "task", t.ID, "err", err)
	return false
}

// CancelElsewhere cancels task id, which the session neither runs nor queues: at the replica that runs
// it, or here when nobody does (Peers.Cancel); done with the ended task then. Not done for a member of
// one process, nor when the caller is to wait for the task's end.
func (s *Side) CancelElsewhere(ctx context.Context, id a2a.TaskID) (*a2a.Task, bool, error) {
	if !s.Replicated() {
		return nil, false, nil
	}
	return s.cfg.Peers.Cancel(ctx, id)
}

// Release gives queued, the stored queued tasks of a session that closes, to the other replicas and
// returns those it gave, for the session to drop: each gives back its place, and its waiters here
// return it as it stands, for its sender to follow at any replica. Every Wait is woken: the ones on
// tasks other replicas run learn that no notice will come to a closed replica. Nothing for a member of
// one process. The session's lock is held.
func (s *Side) Release(ctx context.Context, queued []a2a.TaskID) ([]a2a.TaskID, error) {
	if !s.Replicated() {
		return nil, nil
	}
	ids, err := s.cfg.Peers.Release(ctx, queued)
	for _, id := range ids {
		s.cfg.Gate.Release()
		s.cfg.Waits.Notify(id)
	}
	s.cfg.Waits.NotifyAll()
	if len(ids) > 0 {
		s.cfg.Log.Info("released the queued tasks to the member's other replicas", "count", len(ids))
	}
	return ids, err
}

// Converse returns c with what a member's replicas add to it: follow-ups forwarded to the replica whose
// task waits for them, and large artifact files kept in the store the replicas share. c as it is for a
// member of one process.
func (s *Side) Converse(c converse.Config) converse.Config {
	if s.Replicated() {
		c.Forward = s.cfg.Peers.Forward
		c.Files, _ = s.cfg.Store.(converse.ArtifactKeeper) // the PostgreSQL store the replicas share
	}
	return c
}

// PeerFiles is the store the member's replicas share (the PostgreSQL store) as the keeper of the files
// share-file shares, which the door of any replica then serves; nil for a member of one process, whose
// door serves its export root.
func (s *Side) PeerFiles() share.PeerFileKeeper {
	if !s.Replicated() {
		return nil
	}
	k, _ := s.cfg.Store.(share.PeerFileKeeper)
	return k
}

// Adopt gives the session a task another replica took (or one that lost its replica), if it has a place:
// claim takes the task from the store once the place is held, and the task is queued as if sent here,
// its run continuing the trace of the request that sent it. It reports whether a task was adopted.
func (s *Side) Adopt(ctx context.Context, claim func(context.Context) (*a2a.Task, error)) (bool, error) {
	if _, ok := s.cfg.Gate.Take(); !ok {
		return false, nil
	}
	t, err := claim(ctx)
	if t == nil || err != nil {
		s.cfg.Gate.Release()
		return false, err
	}
	return s.cfg.Queue(s.sentTrace(ctx, t.ID), t)
}

// traceKeeper is the store the member's replicas share as Adopt reads it: the traceparent of the request
// that sent a task, kept with it (the PostgreSQL store).
type traceKeeper interface {
	Traceparent(ctx context.Context, id a2a.TaskID) (string, error)
}

// sentTrace is ctx within the trace context of the request that sent task id to another replica, as the
// shared store keeps it; ctx as it is when it keeps none (DESIGN §17: a task another replica claims
// runs in the trace of the request that sent it).
func (s *Side) sentTrace(ctx context.Context, id a2a.TaskID) context.Context {
	k, ok := s.cfg.Store.(traceKeeper)
	if !ok {
		return ctx
	}
	tp, err := k.Traceparent(ctx, id)
	if err != nil {
		s.cfg.Log.Warn("reading the trace context of a task another replica stored; its run starts a trace of its own", "task", id, "err", err)
		return ctx
	}
	return conv.ContextWithTraceparent(ctx, tp)
}

// Idle reports whether the session runs no task and queues none: a replica claims a task another
// replica offered only then, so that offered tasks run where they start at once.
func (s *Side) Idle() bool { return s.cfg.Idle() }

// Free is how many more tasks the session would take now: run or queue.
func (s *Side) Free() int { return s.cfg.Gate.Free() }

// Cancel cancels a task the session runs or queues.
func (s *Side) Cancel(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error) {
	return s.cfg.Cancel(ctx, id, scope)
}

// Remote tells the task's waiters and streams of a change another replica committed; nothing is stored.
func (s *Side) Remote(ctx context.Context, id a2a.TaskID) {
	if !s.cfg.Waits.Watched(id) && !events.Wants(s.cfg.Events, id) {
		return
	}
	t, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		s.cfg.Log.Warn("reading a task another replica changed", "task", id, "err", err)
		return
	}
	s.cfg.Changed(t)
}

// Resync wakes every Wait to read its task again: a change another replica committed may have gone
// untold (a lost notification).
func (s *Side) Resync() { s.cfg.Waits.NotifyAll() }

// Asks reports whether task id waits here for its sender's input.
func (s *Side) Asks(id a2a.TaskID) bool {
	_, ok := s.cfg.Waiter.Question(id)
	return ok
}

// Asking lists the tasks that wait here for their sender's input.
func (s *Side) Asking() []a2a.TaskID { return s.cfg.Waiter.Tasks() }

// Deliver hands msg, a follow-up another replica forwarded, to the question task id waits on here:
// waiting is false when it waits on none; err says why msg does not answer it (the task keeps waiting).
func (s *Side) Deliver(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (waiting bool, err error) {
	err = s.cfg.Waiter.Deliver(ctx, id, msg)
	if errors.Is(err, converse.ErrNotWaiting) {
		return false, nil
	}
	return true, err
}
