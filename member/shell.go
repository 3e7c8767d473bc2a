package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/runtimetools"
)

// trustedPath is the only PATH shell binaries are resolved on and run with: never the workdir, never a
// PATH a task supplies.
var trustedPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// The defaults of capabilities.shell.
const (
	defaultShellTimeout = 60 * time.Second
	defaultShellMemMB   = 1024
	defaultShellOutKB   = 16
	lingerWait          = 2 * time.Second
)

// resolveShell finds a bare name on the trusted PATH: the absolute path of a regular, executable file.
func resolveShell(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return "", fmt.Errorf("%q is not a bare program name", name)
	}
	for _, dir := range trustedPath {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("capabilities.shell.allow lists %s, which is in none of %s; install it there or remove it from the list",
		name, strings.Join(trustedPath, ", "))
}

// shellTools resolves every name of capabilities.shell.allow once, at staging.
func (s *Session) shellTools() ([]runtimetools.Tool, error) {
	c := s.cfg.Capsule
	var out []runtimetools.Tool
	var errs []error
	for _, name := range c.Capabilities.Shell.Allow {
		path, err := resolveShell(name)
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
	return defaultShellOutKB << 10
}

// ShellAllowed checks a name against capabilities.shell.allow again, at dispatch.
func (s *Session) ShellAllowed(name string) bool {
	return slices.Contains(s.cfg.Capsule.Capabilities.Shell.Allow, name)
}

// confined reports whether shell commands run under the write confinement.
func (s *Session) confined() bool {
	c := s.cfg.Capsule.Capabilities.Shell.Confine
	return (c == nil || *c) && s.cfg.ConfineHelper != "" && LandlockAvailable()
}

// RunShell runs one allowed binary by its absolute path, in the workdir, with a clean environment, its
// time and memory limits, and (unless the capsule turned it off) no write access outside the workdir and
// its temp dir. The command runs in a process group of its own and, as root, in a PID namespace of its
// own, so killing it kills every process it started, a setsid escaper included. With
// lifecycle.shell_grace_secs, a command still running after the grace period moves to the background.
func (s *Session) RunShell(ctx context.Context, path, name string, args []string, stdin string) (runtimetools.ShellRun, error) {
	g := s.cfg.Capsule.Capabilities.Shell
	grace := time.Duration(0)
	if gs := s.cfg.Capsule.Lifecycle.ShellGraceSecs; gs != nil && *gs > 0 {
		grace = time.Duration(*gs) * time.Second
	}
	limit := defaultShellTimeout
	if grace > 0 {
		limit = 0 // a command that may move to the background runs until it ends, is stopped, or the session ends
	}
	if g.TimeoutSecs > 0 {
		limit = time.Duration(g.TimeoutSecs) * time.Second
	}
	memMB := defaultShellMemMB
	if g.MemoryMB > 0 {
		memMB = g.MemoryMB
	}
	work := s.workdir()
	tmp := filepath.Join(work, ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return runtimetools.ShellRun{}, err
	}
	env := []string{"PATH=" + strings.Join(trustedPath, ":"), "HOME=" + work, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
	id := newWorkID()
	memBytes := uint64(memMB) << 20
	if s.cfg.ConfineHelper == "" {
		memBytes = 0 // unconfined (tests): no helper to apply a limit or join a v1 cgroup
	}
	cg, err := newCgroupSet(s.iso, id, memBytes)
	if err != nil {
		return runtimetools.ShellRun{}, err
	}
	var cmd *exec.Cmd
	if s.cfg.ConfineHelper != "" {
		cmd = exec.Command(s.cfg.ConfineHelper, append([]string{ConfineCommand, path, name}, args...)...)
		lock := "0"
		if s.confined() {
			lock = "1"
		}
		rlimit := memBytes
		if cg.mem != "" {
			rlimit = 0 // the kernel holds the whole tree to it, and says when it stepped in
		}
		cmd.Env = append(env, envConfineWrite+"="+work+":"+tmp, fmt.Sprintf("%s=%d", envConfineMem, rlimit),
			envConfineLock+"="+lock, envConfineCgroups+"="+strings.Join(cg.extra, ":"))
	} else {
		cmd = exec.Command(path, args...)
		cmd.Args[0] = name
		cmd.Env = env
	}
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(stdin)
	out := &shellOutput{buf: tail{max: s.shellOutputLimit()}}
	if grace > 0 {
		f, err := os.OpenFile(s.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err != nil {
			cg.remove()
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
	// Both streams share one pipe of our own, so the order read is the order written, and the pipe's
	// identity tells which leftover processes still hold the command's output.
	discard := func() {
		closeLog()
		if out.log != nil {
			os.Remove(out.log.Name())
		}
		cg.remove()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		discard()
		return runtimetools.ShellRun{}, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	// A process group of its own, and where the host allows, a PID namespace (when the command, its PID
	// 1, ends, the kernel kills every process it started) and a cgroup (cgroup.kill ends them all).
	cmd.SysProcAttr = pidNSAttr(s.iso.pidNS)
	if cg.fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cg.fd
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		discard()
		return runtimetools.ShellRun{}, err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, pr)
		close(copied)
	}()
	c := &bgCommand{id: id, name: name, started: time.Now(), pid: cmd.Process.Pid, cg: cg, out: out, logPath: s.logPath(id), done: make(chan struct{})}
	timedOut := make(chan struct{})
	var limitTimer *time.Timer
	if limit > 0 {
		limitTimer = time.AfterFunc(limit, func() {
			close(timedOut)
			c.kill()
		})
	}
	go func() {
		cmd.Wait()
		if limitTimer != nil {
			limitTimer.Stop()
		}
		// Whatever it left behind goes with it. Where the host lets the runtime reach every process the
		// command started, they end at once; otherwise they get lingerWait to let go of the output.
		var lingering bool
		if s.iso.treeKill() {
			lingering = cg.holdsPipe(pr)
			c.kill()
		} else {
			select {
			case <-copied:
			case <-time.After(lingerWait):
				lingering = true
			}
			c.kill()
		}
		select {
		case <-copied:
		case <-time.After(lingerWait): // a process out of reach still holds the pipe: stop reading it
		}
		pr.Close()
		<-copied
		oom := cg.oomKilled()
		if err := cg.remove(); err != nil {
			s.log.Warn("removing a shell command's cgroup", "work_id", id, "err", err)
		}
		c.mu.Lock()
		c.ended = time.Now()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.exitCode = 128 + int(ws.Signal())
		} else {
			c.exitCode = cmd.ProcessState.ExitCode()
		}
		select {
		case <-timedOut:
			c.limit = fmt.Sprintf("its time limit of %s (capabilities.shell.timeout_secs)", limit)
		default:
			if oom {
				c.limit = fmt.Sprintf("its memory limit of %d MB (capabilities.shell.memory_mb)", memMB)
			}
		}
		c.lingering = lingering
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
