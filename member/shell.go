package member

import (
	"context"
	"errors"
	"fmt"
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
// its temp dir. The command and everything it starts share a process group, killed whole at the end.
func (s *Session) RunShell(ctx context.Context, path, name string, args []string, stdin string) (runtimetools.ShellRun, error) {
	g := s.cfg.Capsule.Capabilities.Shell
	limit := defaultShellTimeout
	if g.TimeoutSecs > 0 {
		limit = time.Duration(g.TimeoutSecs) * time.Second
	}
	memMB := defaultShellMemMB
	if g.MemoryMB > 0 {
		memMB = g.MemoryMB
	}
	work := s.cfg.WorkDir
	if work == "" {
		work = s.cfg.Capsule.Dir
	}
	tmp := filepath.Join(work, ".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return runtimetools.ShellRun{}, err
	}
	env := []string{"PATH=" + strings.Join(trustedPath, ":"), "HOME=" + work, "TMPDIR=" + tmp, "LANG=C.UTF-8"}

	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var cmd *exec.Cmd
	if s.cfg.ConfineHelper != "" {
		cmd = exec.CommandContext(ctx, s.cfg.ConfineHelper, append([]string{ConfineCommand, path, name}, args...)...)
		lock := "0"
		if s.confined() {
			lock = "1"
		}
		cmd.Env = append(env, envConfineWrite+"="+work+":"+tmp, fmt.Sprintf("%s=%d", envConfineMem, uint64(memMB)<<20), envConfineLock+"="+lock)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.Args[0] = name
		cmd.Env = env
	}
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(stdin)
	out := &tail{max: s.shellOutputLimit()}
	counter := &countingWriter{w: out}
	cmd.Stdout, cmd.Stderr = counter, counter
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = lingerWait
	err := cmd.Run()
	var run runtimetools.ShellRun
	if cmd.ProcessState != nil {
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			run.ExitCode = 128 + int(ws.Signal())
		default:
			run.ExitCode = ws.ExitStatus()
		}
		// Whatever it left behind goes with it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		run.Limit = fmt.Sprintf("its time limit of %s (capabilities.shell.timeout_secs)", limit)
	case errors.Is(err, exec.ErrWaitDelay):
		run.Lingering = true
	case err != nil && cmd.ProcessState == nil:
		return runtimetools.ShellRun{}, err
	}
	run.Output = []byte(out.String())
	run.OutputBytes = counter.n
	return run, nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}
