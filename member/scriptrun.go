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

	cmd := s.capsuleCommand(ctx, spec.Command, "MUR_TASK_ID="+string(t.ID))
	cmd.Stdin = strings.NewReader(text)
	var stdout capped
	stdout.max = maxScriptAnswer
	var stderr tail
	stderr.max = stderrTail
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

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

// workdir is where the session's commands run: its workdir, or the capsule directory without one.
func (s *Session) workdir() string {
	if s.cfg.WorkDir != "" {
		return s.cfg.WorkDir
	}
	return s.cfg.Capsule.Dir
}

// capsuleCommand prepares a command murmur.yaml names (script.command, lifecycle.done_check): a path
// with a slash is the capsule's own, resolved against its directory; it runs in the workdir with a clean
// environment on the trusted PATH. The command and everything it starts share a process group, killed
// whole when ctx ends; Pdeathsig ends it if the member dies without a chance to kill it.
func (s *Session) capsuleCommand(ctx context.Context, command []string, env ...string) *exec.Cmd {
	name := command[0]
	if strings.Contains(name, "/") {
		name = capsulePath(s.cfg.Capsule.Dir, name)
	}
	cmd := exec.CommandContext(ctx, name, command[1:]...)
	cmd.Dir = s.workdir()
	cmd.Env = append([]string{
		"PATH=" + strings.Join(trustedPath, ":"),
		"HOME=" + cmd.Dir,
		"LANG=C.UTF-8",
		"MUR_MEMBER=" + s.cfg.Member,
		"MUR_FORMATION=" + s.cfg.Formation,
		"MUR_SESSION=" + s.id,
		"MUR_CAPSULE_DIR=" + s.cfg.Capsule.Dir,
	}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// capsulePath resolves a path written in murmur.yaml against the capsule directory.
func capsulePath(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
