package member

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// The clocks of background-command's stop.
const (
	stopKillAfter = 2 * time.Second
	stopWaitMore  = 3 * time.Second
)

// shellOutput is where a command's two streams go, in the order read: the last bytes kept for the model,
// everything counted, and, for a command that may move to the background, everything in its log.
type shellOutput struct {
	mu  sync.Mutex
	buf tail
	n   int64
	log *os.File
	err error // the first failure writing the log
}

func (o *shellOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n += int64(len(p))
	o.buf.Write(p)
	if o.log != nil && o.err == nil {
		if _, err := o.log.Write(p); err != nil {
			o.err = err
		}
	}
	return len(p), nil
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
	cg      *sandbox.Cgroups
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

// backgroundTools is the session as background-command sees it (runtimetools.Background).
type backgroundTools struct{ s *Session }

var _ runtimetools.Background = backgroundTools{}

func (b backgroundTools) Known(id string) bool { return b.s.bgKnown(id) }
func (b backgroundTools) Status(id string) runtimetools.BackgroundState {
	return b.s.state(b.s.bg(id), nil)
}
func (b backgroundTools) Wait(ctx context.Context, task, id string, secs int) runtimetools.BackgroundState {
	return b.s.bgWait(ctx, task, id, secs)
}
func (b backgroundTools) Stop(id string) runtimetools.BackgroundState { return b.s.bgStop(id) }

// bgKnown reports whether this session issued the work id.
func (s *Session) bgKnown(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.background[id]
	return ok
}

func (s *Session) bg(id string) *bgCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.background[id]
}

// state reports the command now; returned marks that this answer carries its exit.
func (s *Session) state(c *bgCommand, waited *int64) runtimetools.BackgroundState {
	out, n := c.out.snapshot()
	st := runtimetools.BackgroundState{WorkID: c.id, WaitedSecs: waited, LogPath: c.logPath, OutputBytes: n,
		Output: out, ShownLimit: s.shellOutputLimit()}
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
	if c.exitCode != 0 || st.Limit != "" || c.out.err != nil {
		st.Status = "error"
	}
	if c.out.err != nil {
		st.WaitError = "writing the log: " + c.out.err.Error()
	}
	st.Lingering = c.lingering
	return st
}

// bgWait waits for a command to exit, up to secs; a cancel of the task ends the wait at once, and the
// state says so (the call's one record, which background-command writes, then carries phase
// background_wait).
func (s *Session) bgWait(ctx context.Context, task, id string, secs int) runtimetools.BackgroundState {
	c := s.bg(id)
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
	st := s.state(c, &waited)
	st.Canceled = canceled
	return st
}

// bgStop sends SIGTERM to the command's process group, SIGKILL 2 s later if it has not exited, then
// waits up to 3 s more. A command that already exited is sent nothing.
func (s *Session) bgStop(id string) runtimetools.BackgroundState {
	c := s.bg(id)
	select {
	case <-c.done:
		return s.state(c, nil)
	default:
	}
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	syscall.Kill(-c.pid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopKillAfter):
		syscall.Kill(-c.pid, syscall.SIGKILL)
		select {
		case <-c.done:
		case <-time.After(stopWaitMore):
		}
	}
	return s.state(c, nil)
}

// moveToBackground registers a running command under a new work id.
func (s *Session) moveToBackground(c *bgCommand) {
	s.mu.Lock()
	s.background[c.id] = c
	s.mu.Unlock()
	s.cfg.Metrics.BackgroundCommands.WithLabelValues("running").Inc()
}

// backgroundEnded accounts for a background command's exit: its gauge, and, under task_acceptance: queue
// with after_task: sleep, a completion task unless background-command already returned the exit.
func (s *Session) backgroundEnded(c *bgCommand) {
	m := s.cfg.Metrics.BackgroundCommands
	m.WithLabelValues("running").Dec()
	c.mu.Lock()
	state := "exited"
	if c.stopped {
		state = "stopped"
	}
	returned := c.returnedEnd
	code := c.exitCode
	c.mu.Unlock()
	m.WithLabelValues(state).Inc()
	cap := s.cfg.Capsule
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || returned || cap.TaskAcceptance != capsule.AcceptQueue || cap.AfterTask != capsule.AfterTaskSleep {
		return
	}
	text := fmt.Sprintf("Background command %s (%s) %s with exit code %d. Its output is in %s; background-command with this work id reports it.",
		c.id, c.name, state, code, c.logPath)
	s.Send(context.Background(), &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}}, Origin{Trust: TrustTrusted, Origin: OriginCompletion})
}

// runningCommandsLocked names the background commands still running. s.mu is held.
func (s *Session) runningCommandsLocked() []string {
	var out []string
	for id, c := range s.background {
		select {
		case <-c.done:
		default:
			out = append(out, id)
		}
	}
	return out
}

// killBackground kills every background command's whole tree; the session's end calls it.
func (s *Session) killBackground() {
	s.mu.Lock()
	cmds := make([]*bgCommand, 0, len(s.background))
	for _, c := range s.background {
		cmds = append(cmds, c)
	}
	s.mu.Unlock()
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
	syscall.Kill(-c.pid, syscall.SIGKILL)
	c.cg.KillAll()
}

func (s *Session) logPath(id string) string { return filepath.Join(s.records.Dir(), "logs", id+".log") }
