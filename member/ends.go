package member

import (
	"context"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/records"
)

// endQueuedLocked ends every stored queued task in state with text (a shutdown, a deadline), as
// finishAllLocked does, without decoding them: the store ends them in one statement (Store.EndAll), and
// only a task someone watches (a stream, a push config) is read back to be published. Their waiters
// wake, their durations are observed and their records written in one write. When background commands
// still run, each task is to name them in its metadata: finishAllLocked's path, a task at a time. s.mu
// is held.
func (s *Session) endQueuedLocked(ctx context.Context, state a2a.TaskState, text string) error {
	if len(s.commands.Running()) > 0 {
		queued, err := s.queuedLocked(ctx)
		return errors.Join(err, s.finishAllLocked(ctx, queued, state, text))
	}
	queued := s.queuedIDsLocked()
	now := s.cfg.Now()
	ended, err := s.cfg.Store.EndAll(ctx, queued, state, text, now)
	if err != nil {
		for range queued {
			s.admit.Release() // they leave the session whether or not their end was stored
		}
		return err
	}
	var errs []error
	recs := make([]records.Record, 0, len(ended))
	word := calls.StateWord(state)
	for _, id := range ended {
		s.admit.Release()
		s.waiters.Notify(id)
		if events.Wants(s.cfg.Events, id) {
			t, err := s.cfg.Store.Get(ctx, id)
			errs = append(errs, err)
			if err == nil {
				events.Publish(s.cfg.Events, t)
			}
		}
		delete(s.continuing, id)
		if at, ok := s.submitted[id]; ok {
			s.cfg.Metrics.TaskDuration.WithLabelValues(string(state)).Observe(now.Sub(at).Seconds())
			delete(s.submitted, id)
		}
		if state == a2a.TaskStateFailed {
			recs = append(recs, records.Record{Type: "task_failed", Task: string(id), Fields: map[string]any{"reason": text}})
		}
		recs = append(recs, records.Record{Type: "task_end", Task: string(id), Fields: map[string]any{"state": string(state), "exit_status": word}})
	}
	if len(ended) > 0 {
		s.lastExit = word
	}
	s.countEnded(state, len(ended))
	if len(recs) > 0 {
		errs = append(errs, s.records.WriteAll(recs))
	}
	return errors.Join(errs...)
}

// notCancelable is Cancel's answer for t, which ended otherwise than canceled.
func notCancelable(t *a2a.Task) error {
	return a2a.ErrTaskNotCancelable.WithMeta("taskId", string(t.ID)).With(fmt.Sprintf(
		"task %s is already %s and cannot be canceled", t.ID, t.Status.State))
}
