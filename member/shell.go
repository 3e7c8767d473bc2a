package member

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// shellTools resolves every name of capabilities.shell.allow once, at staging.
func (s *Session) shellTools() ([]runtimetools.Tool, error) {
	c := s.cfg.Capsule
	var out []runtimetools.Tool
	var errs []error
	for _, name := range c.Capabilities.Shell.Allow {
		path, err := sandbox.ResolveShell(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		}
		out = append(out, &runtimetools.Shell{Name: name, Path: path, OutputLimit: s.shellOutputLimit(), Runner: s})
	}
	return out, errors.Join(errs...)
}

func (s *Session) shellOutputLimit() int {
	if kb := s.cfg.Capsule.Capabilities.Shell.OutputKB; kb > 0 {
		return kb << 10
	}
	return sandbox.DefaultShellOutKB << 10
}

// ShellAllowed checks a name against capabilities.shell.allow again, at dispatch.
func (s *Session) ShellAllowed(name string) bool {
	return slices.Contains(s.cfg.Capsule.Capabilities.Shell.Allow, name)
}

// confined reports whether commands run under their Landlock rules.
func (s *Session) confined() bool {
	c := s.cfg.Capsule.Capabilities.Shell.Confine
	return (c == nil || *c) && s.cfg.ConfineHelper != "" && sandbox.LandlockAvailable()
}

// RunShell runs one allowed binary by its absolute path, in the workdir, with a clean environment, its
// time and memory limits, and (unless the capsule turned it off) its Landlock rules: read only the
// system directories, the capsule directory and capabilities.shell.read, write only the workdir, no
// network unless granted. The command runs in a process group of its own and, where the host allows,
// in a PID namespace of its own, so killing it kills every process it started, a setsid escaper
// included. With lifecycle.shell_grace_secs, a command still running after the grace period moves to
// the background.
func (s *Session) RunShell(ctx context.Context, path, name string, args []string, stdin string) (runtimetools.ShellRun, error) {
	g := s.cfg.Capsule.Capabilities.Shell
	grace := time.Duration(0)
	if gs := s.cfg.Capsule.Lifecycle.ShellGraceSecs; gs != nil && *gs > 0 {
		grace = time.Duration(*gs) * time.Second
	}
	limit := sandbox.DefaultShellTimeout
	if grace > 0 {
		limit = 0 // a command that may move to the background runs until it ends, is stopped, or the session ends
	}
	if g.TimeoutSecs > 0 {
		limit = time.Duration(g.TimeoutSecs) * time.Second
	}
	memMB := sandbox.DefaultShellMemMB
	if g.MemoryMB > 0 {
		memMB = g.MemoryMB
	}
	id := ids.NewWorkID()
	out := &shellOutput{buf: tail{max: s.shellOutputLimit()}}
	if grace > 0 {
		f, err := os.OpenFile(s.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err != nil {
			return runtimetools.ShellRun{}, err
		}
		out.log = f
	}
	closeLog := func() {
		if out.log == nil {
			return
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		if err := out.log.Close(); err != nil && out.err == nil {
			out.err = err
		}
	}
	// Both streams share one pipe, so the order read is the order written.
	p, err := s.start(program{id: id, path: path, name: name, args: args, stdin: strings.NewReader(stdin),
		stdout: out, stderr: out, memMB: memMB})
	if err != nil {
		closeLog()
		if out.log != nil {
			os.Remove(out.log.Name())
		}
		return runtimetools.ShellRun{}, err
	}
	c := &bgCommand{id: id, name: name, started: time.Now(), pid: p.pid, cg: p.cg, out: out, logPath: s.logPath(id), done: make(chan struct{})}
	timedOut := make(chan struct{})
	var limitTimer *time.Timer
	if limit > 0 {
		limitTimer = time.AfterFunc(limit, func() {
			close(timedOut)
			c.kill()
		})
	}
	go func() {
		<-p.exited
		if limitTimer != nil {
			limitTimer.Stop()
		}
		<-p.done
		c.mu.Lock()
		c.ended = time.Now()
		c.exitCode = p.exitCode
		select {
		case <-timedOut:
			c.limit = fmt.Sprintf("its time limit of %s (capabilities.shell.timeout_secs)", limit)
		default:
			if p.oom {
				c.limit = fmt.Sprintf("its memory limit of %d MB (capabilities.shell.memory_mb)", memMB)
			}
		}
		c.lingering = p.lingering
		c.mu.Unlock()
		closeLog()
		close(c.done)
	}()

	var graceC <-chan time.Time
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		graceC = t.C
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		c.kill()
		<-c.done
	case <-graceC:
		s.moveToBackground(c)
		go func() {
			<-c.done
			s.backgroundEnded(c)
		}()
		st := s.state(c, nil)
		return runtimetools.ShellRun{Moved: &st, Note: fmt.Sprintf(
			"[%s] The command was still running after lifecycle.shell_grace_secs (%s) and moved to the background as %s. Its whole output goes to its log; background-command with this work id reports on it, waits for it or stops it.",
			name, grace, id)}, nil
	}
	if out.log != nil {
		os.Remove(c.logPath)
	}
	b, n := out.snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	return runtimetools.ShellRun{ExitCode: c.exitCode, Output: b, OutputBytes: n, Limit: c.limit, Lingering: c.lingering}, nil
}
