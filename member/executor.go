package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/records"
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
	state, msg, ans := a2a.TaskStateFailed, "", (*taskAnswer)(nil)
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
		state, msg, ans = a2a.TaskStateCompleted, answer, &taskAnswer{text: answer, data: p.Data}
	}
	e := &ending{r: r, t: t, state: state, text: msg, answer: ans}
	e.running, e.now = s.endLocked(t, state, msg, ans)
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

// ending is the end of a task that ran, handed to the store and waiting for its commit.
type ending struct {
	r       *runningTask
	t       *a2a.Task
	state   a2a.TaskState
	text    string
	answer  *taskAnswer
	running []string  // the background commands running when it ended
	now     time.Time // when it ended
	wait    func() error
}

// settle runs from Start until the executor's loop ends, taking the ends execute hands it in order:
// once an end is durable, the task leaves the session (endedLocked: its waiters, streams,
// duration, records) and its r.done closes, which Cancel waits for. A session that reached its deadline
// writes its session_end once the last end is settled.
func (s *Session) settle() {
	defer close(s.settled)
	for e := range s.ends {
		err := e.wait()
		s.mu.Lock()
		if err := s.endedOneLocked(e.t, e.state, e.text, e.answer, e.running, e.now, err); err != nil {
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

// taskAnswer is a task's answer: its text, and for a data answer the JSON value the text spells.
type taskAnswer struct {
	text string
	data json.RawMessage
}

// finishLocked moves t, a task that is not running (canceled in the queue, ended by Close while it was
// stored), to a terminal state, stores it, counts it and writes its record. With an answer,
// the task gets its response artifact and the status message carries the answer (a data answer as a
// data part, with a data artifact). s.mu is held.
func (s *Session) finishLocked(ctx context.Context, t *a2a.Task, state a2a.TaskState, text string, answer *taskAnswer) error {
	running, now := s.endLocked(t, state, text, answer)
	err := s.cfg.Store.Update(ctx, t)
	s.admit.Release() // it leaves the session whether or not its end was stored: it waits no more
	return s.endedOneLocked(t, state, text, answer, running, now, err)
}

// endedOneLocked is endedLocked for one task, whose records it writes and which it counts when its end
// was stored. s.mu is held.
func (s *Session) endedOneLocked(t *a2a.Task, state a2a.TaskState, text string, answer *taskAnswer, running []string, now time.Time, err error) error {
	recs, stored, err := s.endedLocked(nil, t, state, text, answer, running, now, err)
	if !stored {
		return err
	}
	s.countEnded(state, 1)
	return errors.Join(err, s.records.WriteAll(recs))
}

// finishAllLocked ends every task of ts in state with text, as finishLocked does, in batches: they are
// stored in one transaction (one fsync), their records written in one write and counted at once, so a
// shutdown or a deadline ends thousands of queued tasks at the cost of a few. s.mu is held.
func (s *Session) finishAllLocked(ctx context.Context, ts []*a2a.Task, state a2a.TaskState, text string) error {
	if len(ts) == 0 {
		return nil
	}
	running := make([][]string, len(ts))
	var now time.Time
	for i, t := range ts {
		running[i], now = s.endLocked(t, state, text, nil)
	}
	stored := s.cfg.Store.UpdateAll(ctx, ts)
	recs := make([]records.Record, 0, len(ts))
	var errs []error
	ended := 0
	for i, t := range ts {
		var ok bool
		var err error
		s.admit.Release()
		recs, ok, err = s.endedLocked(recs, t, state, text, nil, running[i], now, stored[i])
		errs = append(errs, err)
		if ok {
			ended++
		}
	}
	s.countEnded(state, ended)
	errs = append(errs, s.records.WriteAll(recs))
	return errors.Join(errs...)
}

// countEnded counts n tasks that ended in state.
func (s *Session) countEnded(state a2a.TaskState, n int) {
	if n == 0 {
		return
	}
	m := s.cfg.Metrics
	m.TasksActive.Sub(float64(n))
	m.TasksTotal.WithLabelValues(string(state)).Add(float64(n))
}

// endLocked sets t's terminal status (and its answer) before it is stored, and returns the background
// commands still running and the time it ended. s.mu is held.
func (s *Session) endLocked(t *a2a.Task, state a2a.TaskState, text string, answer *taskAnswer) ([]string, time.Time) {
	now := s.cfg.Now()
	s.setStatus(t, state, text, now)
	if answer != nil {
		t.Artifacts = append(t.Artifacts, a2a.Artifact{
			ArtifactID: ids.New("art_"),
			Name:       "response",
			Parts:      []a2a.Part{a2a.TextPart(answer.text)},
		})
		if answer.data != nil {
			converse.AnswerData(t, answer.data)
		}
		t.History = append(t.History, *t.Status.Message)
	}
	running := s.commands.Running()
	if len(running) > 0 {
		ids.Set(murmurMeta(t), ids.MetaRunningCommands, running)
	}
	return running, now
}

// endedLocked does what follows the store's write (err) of t's end: its waiters and streams hear of
// it, its duration is observed and its records are appended to recs, which the caller writes, and counts
// (countEnded) when stored reports the end was stored. The caller has given back t's place in the
// admission gate. s.mu is held.
func (s *Session) endedLocked(recs []records.Record, t *a2a.Task, state a2a.TaskState, text string, answer *taskAnswer, running []string, now time.Time, err error) (_ []records.Record, stored bool, _ error) {
	if err != nil {
		return recs, false, err
	}
	s.changedLocked(t)
	delete(s.continuing, t.ID)
	if at, ok := s.submitted[t.ID]; ok {
		s.cfg.Metrics.TaskDuration.WithLabelValues(string(state)).Observe(now.Sub(at).Seconds())
		delete(s.submitted, t.ID)
	}
	// One record type per question: every task that ends writes task_end (how it ended: state and
	// exit_status); a failed one first writes task_failed (why: its reason). A no_answer task writes no
	// task_failed (SPEC) and its reason rides its task_end, and it never decides session_end.exit_status.
	fields := map[string]any{"state": string(state), "exit_status": calls.StateWord(state)}
	if running != nil {
		fields["runningCommands"] = running
	}
	noAnswer := ids.Get(murmurMeta(t), ids.MetaNoAnswer) == true
	switch {
	case noAnswer:
		fields["exit_status"] = "no_answer"
		fields["reason"] = text
	case state == a2a.TaskStateFailed:
		recs = append(recs, records.Record{Type: "task_failed", Task: string(t.ID), Fields: map[string]any{"reason": text}})
		s.lastExit = calls.StateWord(state)
	default:
		s.lastExit = calls.StateWord(state)
	}
	recs = append(recs, records.Record{Type: "task_end", Task: string(t.ID), Fields: fields})
	switch {
	case answer != nil:
		err = s.records.WriteResult(answer.text)
	case noAnswer:
		err = s.records.WriteResult("no answer: " + text)
	}
	return recs, true, err
}

// setStatus sets t's status; a non-empty text becomes the status message.
func (s *Session) setStatus(t *a2a.Task, state a2a.TaskState, text string, now time.Time) {
	s.cfg.Metrics.TaskState(t.ID, state)
	s.meter.Stamp(t) // the running task's usage so far
	t.Status = a2a.TaskStatus{State: state, Timestamp: a2a.NewTimestamp(now)}
	if text != "" {
		t.Status.Message = &a2a.Message{
			MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
			Role:      a2a.RoleAgent,
			Parts:     []a2a.Part{a2a.TextPart(text)},
			TaskID:    t.ID,
			ContextID: t.ContextID,
		}
	}
}

// changedLocked tells t's Waits and streams of its stored change. s.mu is held.
func (s *Session) changedLocked(t *a2a.Task) {
	s.waiters.Notify(t.ID)
	events.Publish(s.cfg.Events, t)
}

func murmurMeta(t *a2a.Task) map[string]any {
	m := ids.Murmur(t.Metadata)
	return m
}
