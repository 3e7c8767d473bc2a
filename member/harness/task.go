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
	// End asks the task's on-task-end hooks about the answer: the message to reopen the task with, and
	// true when one reopens it (the reopen counted and recorded, as for an http member). nil asks none.
	End func(ctx context.Context, answer string) (reopen string, ok bool)
	// EndNoAnswer asks the on-task-end hooks about an attempt the harness ended with end-without-answer
	// (exit status no_answer): the message to reopen the task with, and true when one reopens it, the
	// end-without-answer then withdrawn. nil asks none.
	EndNoAnswer func(ctx context.Context) (reopen string, ok bool)
}

// RunTask runs one task: the harness with the task's prompt; when it ends its run with member calls
// out, the task waits for their answers (SPEC "How the answer arrives") and resumes the harness's same
// session with the continuation message as the prompt. A harness that called end-without-answer and
// kept going ends the task the same way once it finishes. Once the harness answers with nothing left to
// continue with, the on-task-end hooks (End) are asked; a hook that reopens the task resumes the
// harness's same session with the hook's message as the prompt, as the http loop continues its
// conversation. The caller makes the task the running one (Begin) for as long as its calls last.
func (tr *Transport) RunTask(ctx context.Context, t Task) (string, error) {
	c := tr.cfg.Capsule
	prompt, session := t.Prompt, ""
	for {
		res, stopped, err := tr.Run(ctx, t.ID, prompt, session)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err := t.NoAnswer(); err != nil {
			if t.EndNoAnswer == nil || ctx.Err() != nil {
				return "", err
			}
			msg, reopen := t.EndNoAnswer(ctx)
			if !reopen {
				return "", err
			}
			if err := tr.resumable(res.Session, "an on-task-end hook reopened the task"); err != nil {
				return "", err
			}
			prompt, session = msg, res.Session
			continue
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
		if t.End == nil {
			return res.Answer, nil
		}
		msg, reopen := t.End(ctx, res.Answer)
		if !reopen {
			return res.Answer, nil
		}
		if err := tr.resumable(res.Session, "an on-task-end hook reopened the task"); err != nil {
			return "", err
		}
		prompt, session = msg, res.Session
	}
}

// resumable says why the harness cannot be resumed in session with a hook's message, after what
// happened; nil when it can.
func (tr *Transport) resumable(session, what string) error {
	c := tr.cfg.Capsule
	if session == "" {
		return fmt.Errorf("%s, but the harness reported no session id, so it cannot be resumed with the hook's message (dialect %s)", what, c.Harness.Dialect)
	}
	if len(c.Harness.Resume) == 0 {
		return fmt.Errorf("%s, but %s sets no harness.resume, so the harness cannot be resumed with the hook's message; add resume: [--resume, \"{session}\"] or what the harness takes", what, c.Path)
	}
	return nil
}
