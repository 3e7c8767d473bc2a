package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/runtimetools"
)

// CommandsConfig is what a session's shell commands are given: plain values and callbacks.
type CommandsConfig struct {
	Runner    *Runner
	Grants    capsule.ShellGrant // capabilities.shell
	GraceSecs *int               // lifecycle.shell_grace_secs: a command running longer moves to the background
	LogDir    string             // where a background command's log goes; made at the first
	// Moved is told when a command moves to the background; Ended when a background command exits,
	// from the goroutine that waited for it, with no lock of this package held.
	Moved func()
	Ended func(Ended)
}

// Ended is how a background command ended.
type Ended struct {
	WorkID, Name string
	State        string // exited or stopped
	ExitCode     int
	LogPath      string
	Returned     bool // background-command already returned its exit
}

// Commands runs a session's shell calls (runtimetools.ShellRunner) and keeps the commands that moved to
// the background (runtimetools.Background), under a lock of its own.
type Commands struct {
	cfg        CommandsConfig
	mu         sync.Mutex
	background map[string]*bgCommand // by work id, for the rest of the session
}

// NewCommands returns the shell commands of one session.
func NewCommands(cfg CommandsConfig) *Commands {
	return &Commands{cfg: cfg, background: map[string]*bgCommand{}}
}

// Status reports the background command id now.
func (cm *Commands) Status(id string) runtimetools.BackgroundState { return cm.state(cm.bg(id), nil) }

// OutputLimit is how much of a command's output the model is shown, in bytes.
func (cm *Commands) OutputLimit() int {
	if kb := cm.cfg.Grants.OutputKB; kb > 0 {
		return kb << 10
	}
	return DefaultShellOutKB << 10
}

// ShellAllowed checks a name against capabilities.shell.allow again, at dispatch.
func (cm *Commands) ShellAllowed(name string) bool {
	return slices.Contains(cm.cfg.Grants.Allow, name)
}

// RunShell runs one allowed binary by its absolute path, in the workdir, with a clean environment, its
// time and memory limits, and (unless the capsule turned it off) its Landlock rules: read only the
// system directories, the capsule directory and capabilities.shell.read, write only the workdir, no
// network unless granted. The command runs in a process group of its own and, where the host allows,
// in a PID namespace of its own, so killing it kills every process it started, a setsid escaper
// included. With lifecycle.shell_grace_secs, a command still running after the grace period moves to
// the background.
func (cm *Commands) RunShell(ctx context.Context, path, name string, args []string, stdin string) (runtimetools.ShellRun, error) {
	grace, limit, memMB := cm.limits()
	id := ids.NewWorkID()
	out := &shellOutput{buf: Tail{Max: cm.OutputLimit()}}
	if grace > 0 {
		// The records' logs/ is made by the first command that may need it, not by every session.
		if err := os.MkdirAll(cm.cfg.LogDir, 0o700); err != nil {
			return runtimetools.ShellRun{}, err
		}
		f, err := os.OpenFile(cm.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err != nil {
			return runtimetools.ShellRun{}, err
		}
		out.log = f
	}
	// Both streams share one pipe, so the order read is the order written.
	p, err := cm.cfg.Runner.Start(Program{ID: id, Path: path, Name: name, Args: args, Stdin: strings.NewReader(stdin),
		Stdout: out, Stderr: out, MemMB: memMB})
	if err != nil {
		out.closeLog()
		if out.log != nil {
			_ = os.Remove(out.log.Name()) // cleanup on a failed path: the error returned is the one to report
		}
		return runtimetools.ShellRun{}, err
	}
	c := &bgCommand{id: id, name: name, started: time.Now(), pid: p.Pid, cg: p.Cgroups, out: out, logPath: cm.logPath(id), done: make(chan struct{})}
	c.watch(p, limit, memMB)

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
		return cm.toBackground(c, grace), nil
	}
	if out.log != nil {
		// Done within the grace: its output is in the answer, and a log left behind is only litter.
		_ = os.Remove(c.logPath)
	}
	b, n := out.snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	return runtimetools.ShellRun{ExitCode: c.exitCode, Output: b, OutputBytes: n, Limit: c.limit, Lingering: c.lingering}, nil
}

// limits are a shell call's grace period (0: it never moves to the background), its time limit (0: none
// but the session's end) and its memory limit in MB.
func (cm *Commands) limits() (grace, limit time.Duration, memMB int) {
	g := cm.cfg.Grants
	if gs := cm.cfg.GraceSecs; gs != nil && *gs > 0 {
		grace = time.Duration(*gs) * time.Second
	}
	limit = DefaultShellTimeout
	if grace > 0 {
		limit = 0 // a command that may move to the background runs until it ends, is stopped, or the session ends
	}
	if g.TimeoutSecs > 0 {
		limit = time.Duration(g.TimeoutSecs) * time.Second
	}
	memMB = DefaultShellMemMB
	if g.MemoryMB > 0 {
		memMB = g.MemoryMB
	}
	return grace, limit, memMB
}

// watch kills the started command p once its time limit (0: none) has passed, and, once it has exited
// and its output is closed, records how it ended and closes c.done.
func (c *bgCommand) watch(p *Proc, limit time.Duration, memMB int) {
	timedOut := make(chan struct{})
	var limitTimer *time.Timer
	if limit > 0 {
		limitTimer = time.AfterFunc(limit, func() {
			close(timedOut)
			c.kill()
		})
	}
	go func() {
		<-p.Exited
		if limitTimer != nil {
			limitTimer.Stop()
		}
		<-p.Done
		c.mu.Lock()
		c.ended = time.Now()
		c.exitCode = p.ExitCode
		select {
		case <-timedOut:
			c.limit = fmt.Sprintf("its time limit of %s (capabilities.shell.timeout_secs)", limit)
		default:
			if p.OOM {
				c.limit = fmt.Sprintf("its memory limit of %d MB (capabilities.shell.memory_mb)", memMB)
			}
		}
		c.lingering = p.Lingering
		c.mu.Unlock()
		c.out.closeLog()
		close(c.done)
	}()
}

// toBackground moves a command still running after the grace period to the background, and returns
// what the shell call answers then.
func (cm *Commands) toBackground(c *bgCommand, grace time.Duration) runtimetools.ShellRun {
	cm.moveToBackground(c)
	go func() {
		<-c.done
		cm.backgroundEnded(c)
	}()
	st := cm.state(c, nil)
	return runtimetools.ShellRun{Moved: &st, Note: fmt.Sprintf(
		"[%s] The command was still running after lifecycle.shell_grace_secs (%s) and moved to the background as %s. Its whole output goes to its log; background-command with this work id reports on it, waits for it or stops it.",
		c.name, grace, c.id)}
}

// The clocks of background-command's stop.
const (
	stopKillAfter = 2 * time.Second
	stopWaitMore  = 3 * time.Second
)

// shellOutput is where a command's two streams go, in the order read: the last bytes kept for the model,
// everything counted, and, for a command that may move to the background, everything in its log.
type shellOutput struct {
	mu  sync.Mutex
	buf Tail
	n   int64
	log *os.File
	err error // the first failure writing the log
}

func (o *shellOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n += int64(len(p))
	_, _ = o.buf.Write(p) // memory: a Tail's Write never fails
	if o.log != nil && o.err == nil {
		if _, err := o.log.Write(p); err != nil {
			o.err = err
		}
	}
	return len(p), nil
}

// closeLog closes the log of a command that may move to the background, if it has one; a failure is
// kept as the log's error unless one came first.
func (o *shellOutput) closeLog() {
	if o.log == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.log.Close(); err != nil && o.err == nil {
		o.err = err
	}
}

// logErr is the first failure writing or closing the log; it reads err under the lock its writers hold.
func (o *shellOutput) logErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *shellOutput) snapshot() ([]byte, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return []byte(o.buf.String()), o.n
}

// bgCommand is a shell command that moved to the background.
type bgCommand struct {
	id      string
	name    string
	started time.Time
	pid     int
	cg      *Cgroups
	out     *shellOutput
	logPath string
	done    chan struct{} // closed once the command has exited and its output is closed

	mu          sync.Mutex
	exitCode    int
	ended       time.Time
	stopped     bool // a stop reached it before it ended
	limit       string
	lingering   bool
	returnedEnd bool // background-command already returned its exit
}

// Known reports whether this session issued the work id.
func (cm *Commands) Known(id string) bool {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	_, ok := cm.background[id]
	return ok
}

func (cm *Commands) bg(id string) *bgCommand {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return cm.background[id]
}

// state reports the command now; returned marks that this answer carries its exit.
func (cm *Commands) state(c *bgCommand, waited *int64) runtimetools.BackgroundState {
	out, n := c.out.snapshot()
	st := runtimetools.BackgroundState{WorkID: c.id, WaitedSecs: waited, LogPath: c.logPath, OutputBytes: n,
		Output: out, ShownLimit: cm.OutputLimit()}
	select {
	case <-c.done:
	default:
		st.State = "running"
		st.ElapsedSecs = int64(time.Since(c.started) / time.Second)
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.returnedEnd = true
	st.State = "exited"
	if c.stopped {
		st.State = "stopped"
	} else {
		st.Limit = c.limit
	}
	st.ElapsedSecs = int64(c.ended.Sub(c.started) / time.Second)
	st.ExitCode = c.exitCode
	st.Status = "ok"
	logErr := c.out.logErr()
	if c.exitCode != 0 || st.Limit != "" || logErr != nil {
		st.Status = "error"
	}
	if logErr != nil {
		st.WaitError = "writing the log: " + logErr.Error()
	}
	st.Lingering = c.lingering
	return st
}

// Wait waits for a command to exit, up to secs; a cancel of the task ends the wait at once, and the
// state says so (the call's one record, which background-command writes, then carries phase
// background_wait).
func (cm *Commands) Wait(ctx context.Context, task, id string, secs int) runtimetools.BackgroundState {
	c := cm.bg(id)
	start := time.Now()
	timer := time.NewTimer(time.Duration(secs) * time.Second)
	defer timer.Stop()
	canceled := false
	select {
	case <-c.done:
	case <-timer.C:
	case <-ctx.Done():
		canceled = true
	}
	waited := int64(time.Since(start) / time.Second)
	st := cm.state(c, &waited)
	st.Canceled = canceled
	return st
}

// Stop sends SIGTERM to the command's process group, SIGKILL 2 s later if it has not exited, then
// waits up to 3 s more. A command that already exited is sent nothing.
func (cm *Commands) Stop(id string) runtimetools.BackgroundState {
	c := cm.bg(id)
	select {
	case <-c.done:
		return cm.state(c, nil)
	default:
	}
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	_ = syscall.Kill(-c.pid, syscall.SIGTERM) // it may have exited already (ESRCH): nothing to do
	select {
	case <-c.done:
	case <-time.After(stopKillAfter):
		_ = syscall.Kill(-c.pid, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
		select {
		case <-c.done:
		case <-time.After(stopWaitMore):
		}
	}
	return cm.state(c, nil)
}

// moveToBackground registers a running command under a new work id.
func (cm *Commands) moveToBackground(c *bgCommand) {
	cm.mu.Lock()
	cm.background[c.id] = c
	cm.mu.Unlock()
	if cm.cfg.Moved != nil {
		cm.cfg.Moved()
	}
}

// backgroundEnded hands a background command's exit to the session (Config.Ended).
func (cm *Commands) backgroundEnded(c *bgCommand) {
	c.mu.Lock()
	state := "exited"
	if c.stopped {
		state = "stopped"
	}
	ended := Ended{WorkID: c.id, Name: c.name, State: state, ExitCode: c.exitCode, LogPath: c.logPath, Returned: c.returnedEnd}
	c.mu.Unlock()
	if cm.cfg.Ended != nil {
		cm.cfg.Ended(ended)
	}
}

// Running names the background commands still running.
func (cm *Commands) Running() []string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	var out []string
	for id, c := range cm.background {
		select {
		case <-c.done:
		default:
			out = append(out, id)
		}
	}
	return out
}

// KillAll kills every background command's whole tree; the session's end calls it.
func (cm *Commands) KillAll() {
	cm.mu.Lock()
	cmds := make([]*bgCommand, 0, len(cm.background))
	for _, c := range cm.background {
		cmds = append(cmds, c)
	}
	cm.mu.Unlock()
	for _, c := range cmds {
		select {
		case <-c.done:
			continue
		default:
		}
		c.kill()
		select {
		case <-c.done:
		case <-time.After(stopWaitMore):
		}
	}
}

// kill ends the command's process group and everything in its cgroup.
func (c *bgCommand) kill() {
	_ = syscall.Kill(-c.pid, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
	c.cg.KillAll()
}

func (cm *Commands) logPath(id string) string { return filepath.Join(cm.cfg.LogDir, id+".log") }

// Capped keeps the first max bytes written to it.
type Capped struct {
	buf bytes.Buffer
	Max int
	Cut bool
}

func (c *Capped) Write(p []byte) (int, error) {
	if room := c.Max - c.buf.Len(); room < len(p) {
		c.buf.Write(p[:max(room, 0)])
		c.Cut = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *Capped) String() string { return c.buf.String() }

// Tail keeps the last max bytes written to it.
type Tail struct {
	buf []byte
	Max int
}

func (t *Tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.Max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.Max:]...)
	}
	return len(p), nil
}

func (t *Tail) String() string { return string(t.buf) }
