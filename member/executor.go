package member

import (
	"context"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/end"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/queue"
	"github.com/murmur-run/murmur/member/records"
)

// maxEnding bounds the ends that wait for their commit while the executor goes on: past it, the executor
// waits for the disk.
const maxEnding = 256

// loop is the executor, from Start until Close ends the base context: each time it is kicked, it runs
// the queued tasks that are stored, in order, one at a time. It returns once settle has settled every
// end it handed over.
func (s *Session) loop() {
	defer func() {
		close(s.ends)
		<-s.settled
		close(s.done)
	}()
	for {
		select {
		case <-s.base.Done():
			return
		case <-s.kick:
		}
		for {
			ctx, r, ok := s.next()
			if !ok {
				break
			}
			s.run(ctx, r) // execute, within the task's span
		}
	}
}

// kickLocked wakes the executor. s.mu is held.
func (s *Session) kickLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// next takes the head of the queue and marks it running; the context it returns is the task's, ended by
// Cancel or Close.
func (s *Session) next() (context.Context, *queue.Run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base.Err() != nil || s.expired {
		return nil, nil, false
	}
	ctx, r, ok := s.tasks.Next(s.base)
	if !ok {
		return nil, nil, false
	}
	return s.trc.Take(ctx, r.ID), r, true // the trace context of the request that sent it
}

// execute runs one task to its end and stores every step. Its end is handed to the store and to the
// settler (settle), and execute returns without waiting for the disk: the next task starts while the
// end is committed. It owns r until it hands r to the settler, which closes r.Done once the end is
// durable.
func (s *Session) execute(ctx context.Context, r *queue.Run) {
	defer r.Cancel(nil)
	// Store writes use a context of their own: a canceled task must still be recorded as canceled.
	writes := context.WithoutCancel(ctx)
	t, err := s.cfg.Store.Get(writes, r.ID)
	if err != nil {
		s.log.Error("task vanished from the store before it ran", "task", r.ID, "err", err)
		s.admit.Release()
		s.mu.Lock()
		s.tasks.Hand(r, false)
		s.tasks.Drop(r.ID) // no longer the session's: its waiters read the store, and find it gone
		s.waiters.Notify(r.ID)
		s.mu.Unlock()
		close(r.Done)
		return
	}
	s.mu.Lock()
	r.Task = t
	s.setStatus(t, a2a.TaskStateWorking, "", s.meter.BeginTask(ctx, t))
	if s.side.Replicated() {
		s.mu.Unlock()
		if !s.side.Owns(writes, t) {
			s.letGo(r, t)
			return
		}
		s.mu.Lock()
	} else {
		// Working need not be durable before it is visible: a crash before its commit leaves the task
		// submitted, which the restart ends failed just the same. It rides the store's next group commit.
		s.cfg.Store.UpdateSoon(t)
	}
	s.changedLocked(t)
	s.mu.Unlock()
	if err := s.records.Write(records.TypeTaskStart, string(t.ID), map[string]any{"origin": ids.Get(murmurMeta(t), ids.MetaOrigin), "trust": ids.Get(murmurMeta(t), ids.MetaTrust)}); err != nil {
		s.log.Warn("writing a task_start record", "task", t.ID, "err", err) // the task runs without it
	}

	before := converse.Snapshot(s.workdir())
	text := t.History[0].Text()
	var answer string
	if s.proc != nil {
		answer, err = s.runProcess(ctx, t, text)
	} else if s.cfg.Capsule.IsAgent() {
		answer, err = s.runAgent(ctx, t, text)
	} else {
		answer, err = s.runScript(ctx, t, text)
	}

	// The files it wrote are read (and large ones copied) before the lock: Send does not wait on disk.
	files := s.collectFiles(ctx, t, before)
	s.mu.Lock()
	p := s.meter.EndTask(t) // t gets its metadata.murmur.usage
	if !r.Canceled {
		t.Artifacts = append(t.Artifacts, files...)
	}
	state, msg, ans := end.Run{Canceled: r.Canceled, CallsLeft: r.CallsLeft, Cause: context.Cause(ctx), Shutdown: s.base.Err() != nil,
		Deadline: s.deadline, Answer: answer, Data: p.Data, Err: err, OneTurn: s.cfg.Capsule.AnswersWithMessage() && p.Turns <= 1}.Decide(t)
	e := &ending{r: r, t: t, end: s.endOf(state, msg, ans)}
	s.markLocked(t, e.end)
	e.wait = s.cfg.Store.UpdateLater(writes, t)
	// The session is free for the next task the moment the end is handed to the store, and so is the
	// task's place in the admission gate: a client that reads the end (once it is durable) and sends at
	// once is never refused for a task that has ended. The end is visible, and its waiters told, only once
	// it is durable (settle).
	s.tasks.Hand(r, true)
	s.admit.Release()
	s.mu.Unlock()
	s.ends <- e
}

// ending is the end of a task that ran, handed to the store and waiting for its commit (settle).
type ending struct {
	r    *queue.Run
	t    *a2a.Task
	end  end.End
	wait func() error // UpdateLater's: returns once the end is durable
}

// settle runs from Start until the executor's loop ends, taking the ends execute hands it in order: once
// an end is durable, it is settled (settleLocked: the task's waiters, streams, duration, records) and
// r.Done closes, which Cancel waits for. A session that reached its deadline writes its session_end once
// the last end is settled.
func (s *Session) settle() {
	defer close(s.settled)
	for e := range s.ends {
		stored := e.wait()
		s.mu.Lock()
		if err := s.settleLocked(context.Background(), e.end, []a2a.TaskID{e.t.ID}, []*a2a.Task{e.t}, []error{stored}); err != nil {
			s.log.Error("storing the task's end", "task", e.t.ID, "err", err)
		}
		s.tasks.Settled(e.t.ID)
		if s.tasks.Quiet() {
			s.writeDeadlineEndLocked()
		}
		s.mu.Unlock()
		close(e.r.Done)
	}
}

// setStatus sets t's status; a non-empty text becomes the status message.
func (s *Session) setStatus(t *a2a.Task, state a2a.TaskState, text string, now time.Time) {
	s.cfg.Metrics.TaskState(t.ID, state)
	s.meter.Stamp(t) // the running task's usage so far
	t.Status = end.Status(t, state, text, now)
}

// changedLocked tells t's Waits and streams of its stored change. s.mu is held.
func (s *Session) changedLocked(t *a2a.Task) {
	s.waiters.Notify(t.ID)
	events.Publish(s.cfg.Events, t)
}

func murmurMeta(t *a2a.Task) map[string]any { return ids.Murmur(t.Metadata) }

// letGo lets r go unrun, a task the member's replicas gave another replica while it waited in this
// one's queue (replica.Side.Owns): its place and its count are given back, and its owner's changes
// reach the waiters here through the store's notices.
func (s *Session) letGo(r *queue.Run, t *a2a.Task) {
	s.meter.EndTask(t)
	s.admit.Release()
	s.mu.Lock()
	s.tasks.Hand(r, false)
	s.tasks.Drop(r.ID)
	s.mu.Unlock()
	s.cfg.Metrics.TasksActive.Dec()
	close(r.Done)
}
