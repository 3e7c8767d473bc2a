package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/records"
)

// The runtime's own messages to the model.
const (
	keepWorkingNudge = "[runtime] You ended your turn without an answer. Keep working on the task, and end your turn with your answer as text when you have it."
	deadlineNotice   = "Session deadline: the runtime ends this session at %s, in %d seconds."
)

// Config is what a session's Rules are given: plain values, its meter and callbacks.
type Config struct {
	Capsule  *capsule.Capsule
	Deadline time.Time // the session's; zero: none
	Now      func() time.Time
	Meter    *meter.Meter
	// RunCheck runs done_check's command, confined (sandbox.Runner.RunCheck): its output's end and its
	// exit code.
	RunCheck func(ctx context.Context, command []string) (string, int, error)
	// Record writes one record of the session.
	Record records.WriteFunc
}

// Rules applies one session's lifecycle settings.
type Rules struct {
	cfg        Config
	noticeSent atomic.Bool
}

// New returns the rules of a session that has given no deadline notice yet.
func New(cfg Config) *Rules { return &Rules{cfg: cfg} }

// Nudge answers a turn that ended without an answer: the message that keeps the task working while
// lifecycle.keep_working has a nudge left (and its keep_working record), else the task's error.
func (r *Rules) Nudge(task string) (string, error) {
	used, left, ok := r.cfg.Meter.KeepWorking()
	if !ok {
		return "", errors.New("the model ended its turn without an answer")
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = r.cfg.Record(records.TypeKeepWorking, task, map[string]any{"used": used, "left": left})
	return keepWorkingNudge, nil
}

// Check runs lifecycle.done_check on an answer: "" when the check passes or the capsule sets none;
// the message that reopens the task when it fails with a reopen left (and its task_reopened record);
// else the task's error, which is ctx's when ctx ended.
func (r *Rules) Check(ctx context.Context, task string) (string, error) {
	dc := r.cfg.Capsule.Lifecycle.DoneCheck
	if dc == nil {
		return "", nil
	}
	out, code, err := r.cfg.RunCheck(ctx, dc.Command)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err == nil && code == 0 {
		return "", nil
	}
	detail := fmt.Sprintf("exited with status %d", code)
	if err != nil {
		detail = "could not run: " + err.Error()
	}
	used, ok := r.cfg.Meter.CheckFailed()
	if !ok {
		return "", fmt.Errorf("lifecycle.done_check `%s` %s after %d reopen(s); the task ends unverified: %s",
			strings.Join(dc.Command, " "), detail, used, lastLine(out))
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = r.cfg.Record(records.TypeTaskReopened, task, map[string]any{
		"reason": "done_check", "command": dc.Command, "exit_code": code, "used": used, "left": dc.Limit - used})
	return fmt.Sprintf("[runtime] The task is not done: its check `%s` %s.\n%s\nKeep working until the check passes, then answer again.",
		strings.Join(dc.Command, " "), detail, driver.Fence("done_check", out, "")), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Notice returns SPEC's deadline notice line once per session, for the first tool result inside the
// margin (capsule.NoticeMargin), and writes its record; otherwise "".
func (r *Rules) Notice(task string) string {
	deadline, margin, now := r.cfg.Deadline, r.cfg.Capsule.NoticeMargin(), r.cfg.Now()
	if deadline.IsZero() || margin <= 0 || deadline.Sub(now) > margin || !r.noticeSent.CompareAndSwap(false, true) {
		return ""
	}
	at := deadline.UTC().Format(time.RFC3339)
	left := max(int64(deadline.Sub(now)/time.Second), 0)
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = r.cfg.Record(records.TypeDeadlineNotice, task, map[string]any{"at": at, "left_secs": left})
	return fmt.Sprintf(deadlineNotice, at, left)
}
