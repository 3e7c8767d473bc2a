package member

import (
	"context"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/end"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/records"
)

// endOf builds the end of a task, or of many ended at once, with state, text and answer; the time and
// the background commands still running are taken here, once. Every end of a task starts here and goes
// one way, in three steps, whichever of the three paths takes it:
//
//  1. markLocked writes the end into the task under s.mu, before it is stored: its status (and its
//     mur_task_state series), its usage so far, its answer's artifacts, the running commands.
//  2. The store commits it. execute hands a task it ran to the store without waiting (UpdateLater) and
//     to settle, which waits for the commit without s.mu; finishLocked, for tasks that are not running,
//     waits for it holding s.mu (Update, or UpdateAll for many: one transaction); endQueuedLocked lets
//     the store end the stored queued tasks in one statement without decoding them (EndAll). Each task's
//     place in the admission gate is given back before anyone is told of its end, stored or not: by
//     execute when it hands the end over, by the other two once the store has answered.
//  3. settleLocked, under s.mu, once the store has answered: for each task whose end is durable, in
//     order, its waiters wake and its streams and push hear of it (never before the end is durable),
//     it leaves the session (its duration observed), its records are gathered and its answer (or its
//     lack of one) handed to out/result.txt; then the tasks are counted (mur_tasks_active,
//     mur_tasks_total) and their task_failed and task_end records written in one write. For a task
//     execute ran, settle then closes r.Done, which Cancel and awaitSettled wait for.
//
// Durable when: finishLocked's and endQueuedLocked's ends when they return; execute's when r.Done
// closes (execute returns before, so the next task starts while the end is committed). A task whose end
// the store did not write is neither told nor counted nor recorded: its error is returned (settle logs
// it), and the store's next start ends the task failed. The callers hold s.mu.
func (s *Session) endOf(state a2a.TaskState, text string, answer *end.Answer) end.End {
	return end.End{State: state, Text: text, Answer: answer, At: s.cfg.Now(), Running: s.commands.Running()}
}

// markLocked writes e into t before t is stored (endOf's step 1). s.mu is held.
func (s *Session) markLocked(t *a2a.Task, e end.End) {
	s.cfg.Metrics.TaskState(t.ID, e.State)
	s.meter.Stamp(t) // its usage so far
	e.Apply(t)
}

// finishLocked ends ts, tasks that are not running (canceled in the queue, queued when the session
// ended, ended by Close while they were stored), with e (endOf's path): durable on return, one as Update
// does, many in one transaction (one fsync), their records written in one write, so a shutdown ends
// thousands of queued tasks at the cost of a few. s.mu is held.
func (s *Session) finishLocked(ctx context.Context, e end.End, ts ...*a2a.Task) error {
	ids := make([]a2a.TaskID, len(ts))
	for i, t := range ts {
		s.markLocked(t, e)
		ids[i] = t.ID
	}
	var stored []error
	switch len(ts) {
	case 0:
		return nil
	case 1:
		stored = []error{s.cfg.Store.Update(ctx, ts[0])}
	default:
		stored = s.cfg.Store.UpdateAll(ctx, ts)
	}
	for range ts {
		s.admit.Release() // it leaves the session whether or not its end was stored: it waits no more
	}
	return s.settleLocked(ctx, e, ids, ts, stored)
}

// endQueuedLocked ends every stored queued task in state with text (a shutdown, a deadline), endOf's
// path: the store ends them in one statement (EndAll) and settleLocked reads back only a task someone
// watches (a stream, a push config). When background commands still run, each task is to name them in
// its metadata: they are read and finished (finishLocked). s.mu is held.
func (s *Session) endQueuedLocked(ctx context.Context, state a2a.TaskState, text string) error {
	e := s.endOf(state, text, nil)
	if len(e.Running) > 0 {
		queued, err := s.queuedLocked(ctx)
		return errors.Join(err, s.finishLocked(ctx, e, queued...))
	}
	queued := s.tasks.Queued()
	ended, err := s.cfg.Store.EndAll(ctx, queued, e.State, e.Text, e.At)
	if err != nil {
		for range queued {
			s.admit.Release() // they leave the session whether or not their end was stored
		}
		return err
	}
	for range ended {
		s.admit.Release()
	}
	return s.settleLocked(ctx, e, ended, nil, nil)
}

// settleLocked does what follows the store's answer for the end e of tasks ids (endOf's step 3):
// stored[i] is the store's error for ids[i] (nil stored: every end was stored), ts[i] the task as stored
// (nil ts: the store ended them without decoding them, and one is read back only for whoever watches
// it). It returns the errors of the ends not stored, of the tasks read back and of the records. s.mu is
// held.
func (s *Session) settleLocked(ctx context.Context, e end.End, ids []a2a.TaskID, ts []*a2a.Task, stored []error) error {
	var errs []error
	recs := make([]records.Record, 0, len(ids))
	settled := 0
	for i, id := range ids {
		if stored != nil && stored[i] != nil {
			errs = append(errs, stored[i])
			continue
		}
		settled++
		noAnswer := false
		if ts != nil {
			s.changedLocked(ts[i])
			noAnswer = end.NoAnswer(ts[i])
		} else {
			s.waiters.Notify(id)
			if events.Wants(s.cfg.Events, id) {
				t, err := s.cfg.Store.Get(ctx, id)
				if errs = append(errs, err); err == nil {
					events.Publish(s.cfg.Events, t)
				}
			}
		}
		if at, held := s.tasks.Forget(id); held {
			s.cfg.Metrics.TaskDuration.WithLabelValues(string(e.State)).Observe(e.At.Sub(at).Seconds())
		}
		recs = e.Records(recs, id, noAnswer)
		if exit := e.Exit(noAnswer); exit != "" {
			s.lastExit = exit
		}
		if text, ok := e.Result(noAnswer); ok {
			errs = append(errs, s.records.WriteResult(text))
		}
	}
	if settled > 0 {
		s.cfg.Metrics.TasksActive.Sub(float64(settled))
		s.cfg.Metrics.TasksTotal.WithLabelValues(string(e.State)).Add(float64(settled))
	}
	return errors.Join(append(errs, s.records.WriteAll(recs))...)
}

// notCancelable is Cancel's answer for t, which ended otherwise than canceled.
func notCancelable(t *a2a.Task) error {
	return a2a.ErrTaskNotCancelable.WithMeta("taskId", string(t.ID)).With(fmt.Sprintf(
		"task %s is already %s and cannot be canceled", t.ID, t.Status.State))
}
