package member

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/end"
	"github.com/murmur-run/murmur/member/events"
)

// execute runs one task to its end and stores every step. Its end is handed to the store and to the
// settler (settle), and execute returns without waiting for the disk: the next task starts while the
// end is committed. It owns r until it hands r to the settler, which closes r.done once the end is
// durable.
func (s *Session) execute(ctx context.Context, r *runningTask) {
	defer r.cancel(nil)
	// Store writes use a context of their own: a canceled task must still be recorded as canceled.
	store := context.WithoutCancel(ctx)
	t, err := s.cfg.Store.Get(store, r.id)
	if err != nil {
		s.log.Error("task vanished from the store before it ran", "task", r.id, "err", err)
		s.admit.Release()
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
		close(r.done)
		return
	}
	s.mu.Lock()
	r.task = t
	s.setStatus(t, a2a.TaskStateWorking, "", s.meter.BeginTask(ctx, t))
	// Working need not be durable before it is visible: a crash before its commit leaves the task
	// submitted, which the restart ends failed just the same. It rides the store's next group commit.
	s.cfg.Store.UpdateSoon(t)
	s.changedLocked(t)
	s.mu.Unlock()
	s.records.Write("task_start", string(t.ID), map[string]any{"origin": ids.Get(murmurMeta(t), ids.MetaOrigin), "trust": ids.Get(murmurMeta(t), ids.MetaTrust)})

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
	callsLeft := s.callsLeft[string(t.ID)]
	delete(s.callsLeft, string(t.ID))
	if !r.canceled {
		t.Artifacts = append(t.Artifacts, files...)
	}
	var timedOut *converse.InputTimeout
	state, msg, ans := a2a.TaskStateFailed, "", (*end.Answer)(nil)
	switch {
	case r.canceled:
		state, msg = a2a.TaskStateCanceled, CanceledMessage
		if callsLeft > 0 {
			msg = fmt.Sprintf(CanceledCallsRunning, callsLeft)
		}
	case errors.As(context.Cause(ctx), &timedOut):
		msg = timedOut.Error()
	case context.Cause(ctx) == errSessionDeadline:
		msg = fmt.Sprintf(DeadlineFail, s.deadline.UTC().Format(time.RFC3339))
	case s.base.Err() != nil:
		state, msg = a2a.TaskStateCanceled, ShutdownCancel
	case errors.As(err, new(*errNoAnswer)):
		var na *errNoAnswer
		errors.As(err, &na)
		meta := murmurMeta(t)
		ids.Set(meta, ids.MetaNoAnswer, true)
		ids.Set(meta, ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(na.below))
		msg = na.reason
	case err != nil:
		msg = err.Error()
	default:
		if s.cfg.Capsule.AnswersWithMessage() && p.Turns <= 1 {
			ids.Set(murmurMeta(t), ids.MetaOneTurn, true) // the door answers it with a Message
		}
		state, msg, ans = a2a.TaskStateCompleted, answer, &end.Answer{Text: answer, Data: p.Data}
	}
	e := &ending{r: r, t: t, end: s.endOf(state, msg, ans)}
	s.markLocked(t, e.end)
	e.wait = s.cfg.Store.UpdateLater(store, t)
	// The session is free for the next task the moment the end is handed to the store, and so is the
	// task's place in the admission gate: a client that reads the end (once it is durable) and sends at
	// once is never refused for a task that has ended. The end is visible, and its waiters told, only once
	// it is durable (settle).
	s.running = nil
	s.ending[t.ID] = r
	s.admit.Release()
	s.mu.Unlock()
	s.ends <- e
}

// ending is the end of a task that ran, handed to the store and waiting for its commit (settle).
type ending struct {
	r    *runningTask
	t    *a2a.Task
	end  end.End
	wait func() error // UpdateLater's: returns once the end is durable
}

// settle runs from Start until the executor's loop ends, taking the ends execute hands it in order: once
// an end is durable, it is settled (settleLocked: the task's waiters, streams, duration, records) and
// r.done closes, which Cancel waits for. A session that reached its deadline writes its session_end once
// the last end is settled.
func (s *Session) settle() {
	defer close(s.settled)
	for e := range s.ends {
		stored := e.wait()
		s.mu.Lock()
		if err := s.settleLocked(context.Background(), e.end, []a2a.TaskID{e.t.ID}, []*a2a.Task{e.t}, []error{stored}); err != nil {
			s.log.Error("storing the task's end", "task", e.t.ID, "err", err)
		}
		delete(s.ending, e.t.ID)
		if s.running == nil && len(s.ending) == 0 {
			s.writeDeadlineEndLocked()
		}
		s.mu.Unlock()
		close(e.r.done)
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
