package member

import (
	"context"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/sandbox"
)

// backgroundEnded accounts for a background command's exit: its gauge, and, under task_acceptance: queue
// with after_task: sleep, a completion task unless background-command already returned the exit.
func (s *Session) backgroundEnded(e sandbox.Ended) {
	m := s.cfg.Metrics.BackgroundCommands
	m.WithLabelValues("running").Dec()
	m.WithLabelValues(e.State).Inc()
	s.trc.BackgroundEnded(e.WorkID, e.State, e.ExitCode)
	cap := s.cfg.Capsule
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || e.Returned || cap.TaskAcceptance != capsule.AcceptQueue || cap.AfterTask != capsule.AfterTaskSleep {
		return
	}
	text := fmt.Sprintf("Background command %s (%s) %s with exit code %d. Its output is in %s; background-command with this work id reports it.",
		e.WorkID, e.Name, e.State, e.ExitCode, e.LogPath)
	if _, err := s.Send(context.Background(), &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}}, Origin{Trust: TrustTrusted, Origin: OriginCompletion}); err != nil {
		s.log.Warn("a background command's completion could not be given to the session as a task", "work", e.WorkID, "err", err)
	}
}
