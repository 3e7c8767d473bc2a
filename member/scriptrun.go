package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
// A non-zero exit fails the task with the tail of stderr; the time limit kills the whole process group.
func (s *Session) runScript(ctx context.Context, t *a2a.Task, text string) (string, error) {
	spec := s.cfg.Capsule.Script
	limit := defaultScriptTimeout
	if spec.TimeoutSecs > 0 {
		limit = time.Duration(spec.TimeoutSecs) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	name := spec.Command[0]
	if strings.Contains(name, "/") {
		name = capsulePath(s.cfg.Capsule.Dir, name)
	}
	cmd := exec.CommandContext(ctx, name, spec.Command[1:]...)
	cmd.Dir = s.cfg.WorkDir
	if cmd.Dir == "" {
		cmd.Dir = s.cfg.Capsule.Dir
	}
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + cmd.Dir,
		"LANG=C.UTF-8",
		"MUR_MEMBER=" + s.cfg.Member,
		"MUR_FORMATION=" + s.cfg.Formation,
		"MUR_SESSION=" + s.id,
		"MUR_TASK_ID=" + string(t.ID),
		"MUR_CAPSULE_DIR=" + s.cfg.Capsule.Dir,
	}
	cmd.Stdin = strings.NewReader(text)
	var stdout capped
	stdout.max = maxScriptAnswer
	var stderr tail
	stderr.max = stderrTail
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The command and everything it starts share a process group, killed whole on cancel or timeout.
	// Pdeathsig ends the command if the member dies without a chance to kill it (SIGKILL).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second

	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return "", fmt.Errorf("script %s did not finish within %s (script.timeout_secs) and was killed", spec.Command[0], limit)
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			msg := fmt.Sprintf("script %s exited with status %d", spec.Command[0], exit.ExitCode())
			if st := strings.TrimSpace(stderr.String()); st != "" {
				msg += ": " + st
			}
			return "", errors.New(msg)
		}
		return "", fmt.Errorf("script %s could not run: %v", spec.Command[0], err)
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

// capsulePath resolves a path written in murmur.yaml against the capsule directory.
func capsulePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
