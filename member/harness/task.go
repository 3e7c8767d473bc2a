package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Task is one task run under the process transport: its prompt, and callbacks into the session's
// member calls, delegations and accounting.
type Task struct {
	ID     string
	Prompt string
	// NoAnswer is the error the task ends with once the harness called end-without-answer; nil before.
	NoAnswer func() error
	// Outstanding reports whether a member call or a delegation of the task is still out, or ended and
	// not yet delivered.
	Outstanding func() bool
	// TurnsLeft reports whether the task has a turn left of inference.max_turns.
	TurnsLeft func() bool
	// Resume waits for every call and delegation to end and returns the continuation message.
	Resume func(ctx context.Context) (prompt string, err error)
}

// RunTask runs one task: the harness with the task's prompt; when it ends its run with member calls
// out, the task waits for their answers (SPEC "How the answer arrives") and resumes the harness's same
// session with the continuation message as the prompt. A harness that called end-without-answer and
// kept going ends the task the same way once it finishes. The caller makes the task the running one
// (Begin) for as long as its calls last.
func (tr *Transport) RunTask(ctx context.Context, t Task) (string, error) {
	c := tr.cfg.Capsule
	prompt, session := t.Prompt, ""
	for {
		res, stopped, err := tr.Run(ctx, t.ID, prompt, session)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err := t.NoAnswer(); err != nil {
			return "", err
		}
		if stopped != nil {
			return "", stopped
		}
		if err != nil {
			return "", err
		}
		if t.Outstanding() && t.TurnsLeft() {
			if res.Session == "" {
				return "", fmt.Errorf("the harness reported no session id, so it cannot be resumed with the answers of the members it called (dialect %s)", c.Harness.Dialect)
			}
			if len(c.Harness.Resume) == 0 {
				return "", fmt.Errorf("the harness called members, but %s sets no harness.resume, so it cannot be resumed with their answers; add resume: [--resume, \"{session}\"] or what the harness takes", c.Path)
			}
			if prompt, err = t.Resume(ctx); err != nil {
				return "", err
			}
			session = res.Session
			continue
		}
		if strings.TrimSpace(res.Answer) == "" {
			return "", errors.New("the harness ended its run with an empty answer")
		}
		return res.Answer, nil
	}
}
