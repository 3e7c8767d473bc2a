package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
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

	var stdout capped
	stdout.max = maxScriptAnswer
	var stderr tail
	stderr.max = stderrTail
	code, err := s.runCommand(ctx, spec.Command, strings.NewReader(text), &stdout, &stderr, "MUR_TASK_ID="+string(t.ID))
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
	if stdout.cut {
		out += fmt.Sprintf("\n[answer cut at %d bytes]", maxScriptAnswer)
	}
	return out, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.buf.Write(p[:max(room, 0)])
		c.cut = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return c.buf.String() }

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.buf) }

// workdir is where the session's commands run: its workdir, or the capsule directory without one.
func (s *Session) workdir() string {
	if s.cfg.WorkDir != "" {
		return s.cfg.WorkDir
	}
	return s.cfg.Capsule.Dir
}
