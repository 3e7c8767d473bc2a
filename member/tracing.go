package member

import (
	"context"

	"github.com/murmur-run/murmur/member/queue"
	"github.com/murmur-run/murmur/member/spans"
)

// run executes task r (execute) within its invoke_agent span, a child of the span of the request that
// sent it, which ctx carries (next takes it with the task from the queue): one request to the entry
// member is one trace across every member it reaches. The task's records carry the span while it runs
// and up to its task_end.
func (s *Session) run(ctx context.Context, r *queue.Run) {
	ctx, span := s.trc.StartAgent(ctx, s.cfg.Member, r.ID)
	defer span.End()
	if !span.IsRecording() {
		s.execute(ctx, r)
		return
	}
	sc := span.SpanContext()
	s.records.Bind(string(r.ID), sc.TraceID().String(), sc.SpanID().String())
	s.trc.SetRunning(r.ID, span)
	s.execute(ctx, r)
	s.trc.SetRunning("", nil)
	s.mu.Lock()
	spans.EndAgent(span, r.Task) // the task's fields are written under the lock
	s.mu.Unlock()
}

// noteTurns puts on the task's span (ctx's) how many inference calls the task has made; the agent loop
// and the process transport call it as the run ends, while the meter still counts the task.
func (s *Session) noteTurns(ctx context.Context) {
	turns, _ := s.meter.Used()
	spans.NoteTurns(ctx, turns)
}
