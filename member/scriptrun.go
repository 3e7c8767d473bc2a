package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/sandbox"
)

// Limits of a script capsule's run.
const (
	defaultScriptTimeout = 5 * time.Minute
	maxScriptAnswer      = 4 << 20 // bytes of stdout kept as the answer
	stderrTail           = 2 << 10 // bytes of stderr quoted in a failure
)

// runScript runs the script capsule's command for one task: the task text on stdin, stdout the answer.
// A non-zero exit fails the task with the tail of stderr; the time limit kills it and everything it
// started. It runs confined as every command is (Session.start).
func (s *Session) runScript(ctx context.Context, t *a2a.Task, text string) (string, error) {
	spec := s.cfg.Capsule.Script
	limit := defaultScriptTimeout
	if spec.TimeoutSecs > 0 {
		limit = time.Duration(spec.TimeoutSecs) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	var stdout sandbox.Capped
	stdout.Max = maxScriptAnswer
	var stderr sandbox.Tail
	stderr.Max = stderrTail
	code, err := s.runner.RunCommand(ctx, spec.Command, strings.NewReader(text), &stdout, &stderr, "MUR_TASK_ID="+string(t.ID))
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return "", fmt.Errorf("script %s did not finish within %s (script.timeout_secs) and was killed", spec.Command[0], limit)
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		return "", fmt.Errorf("script %s could not run: %v", spec.Command[0], err)
	case code != 0:
		msg := fmt.Sprintf("script %s exited with status %d", spec.Command[0], code)
		if st := strings.TrimSpace(stderr.String()); st != "" {
			msg += ": " + st
		}
		return "", errors.New(msg)
	}
	out := strings.TrimSuffix(stdout.String(), "\n")
	if stdout.Cut {
		out += fmt.Sprintf("\n[answer cut at %d bytes]", maxScriptAnswer)
	}
	return out, nil
}

// workdir is where the session's commands run: its workdir, or the capsule directory without one.
func (s *Session) workdir() string {
	if s.cfg.WorkDir != "" {
		return s.cfg.WorkDir
	}
	return s.cfg.Capsule.Dir
}
