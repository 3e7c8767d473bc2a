// Package attempt is one attempt of an agent task, under either transport: the member calls it makes
// (member/calls) and its delegations (member/delegate), which call-member, delegate-task and
// end-without-answer answer through while it runs; its end without an answer (SPEC
// "end-without-answer"); the wait for what its calls and delegations answer (SPEC "How the answer
// arrives"); and the on-task-end hooks that may reopen it. The session starts one with each run of an
// agent task and ends it when the run returns; it knows nothing of the session but its Config.
package attempt

import (
	"context"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/hooks"
)

// Config is what an attempt is given.
type Config struct {
	Calls       calls.Config    // the tracker of its member calls (calls.Start)
	Delegations delegate.Config // the tracker of its delegations (delegate.Start)
	// TaskEnd asks the on-task-end hooks about the attempt's end (staged.Set.CheckTaskEnd): the message
	// to continue with when one reopens the task.
	TaskEnd func(context.Context, hooks.TaskEnd) (string, bool)
	// Reopens is how often the task was reopened so far; Reopened counts one more (meter.Meter).
	Reopens  func() int
	Reopened func()
}

// Attempt is one attempt of an agent task. It is safe for concurrent use, as its trackers are.
type Attempt struct {
	cfg  Config
	task string

	Calls       *calls.Tracker
	Delegations *delegate.Tracker
	stopCalls   context.CancelFunc
	stopDelegs  context.CancelFunc
}

// Start starts the attempt of task, whose calls and delegations end with ctx or End.
func Start(ctx context.Context, cfg Config, task string) *Attempt {
	a := &Attempt{cfg: cfg, task: task}
	cctx, stopCalls := context.WithCancel(ctx)
	a.Calls, a.stopCalls = calls.Start(cctx, cfg.Calls, task), stopCalls
	dctx, stopDelegs := context.WithCancel(ctx)
	a.Delegations, a.stopDelegs = delegate.Start(dctx, cfg.Delegations, task), stopDelegs
	return a
}

// End ends the attempt's calls and delegations (their trackers' Finish) and returns how many of the
// tasks it gave other members are still running: a cancel reaches none of them.
func (a *Attempt) End() (leftRunning int) {
	a.Calls.Finish(a.stopCalls)
	a.Delegations.Finish(a.stopDelegs)
	return a.Calls.LeftRunning()
}

// Trust is the trust class of the task the attempt runs, which its hooks are told.
func (a *Attempt) Trust() ids.Trust { return a.Calls.Trust() }

// NoAnswerError ends a task whose model called end-without-answer.
type NoAnswerError struct {
	Reason string
	Below  []calls.NoAnswer // the members it called that gave no answer
}

func (e *NoAnswerError) Error() string { return e.Reason }

// Mark writes the end into t's metadata.murmur: no answer, and the members below that gave none.
func (e *NoAnswerError) Mark(t *a2a.Task) {
	meta := ids.Murmur(t.Metadata)
	ids.Set(meta, ids.MetaNoAnswer, true)
	ids.Set(meta, ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(e.Below))
}

// NoAnswer is the *NoAnswerError the task ends with once its model called end-without-answer; nil
// before.
func (a *Attempt) NoAnswer() error {
	if reason, ok := a.Calls.NoAnswer(); ok {
		return &NoAnswerError{Reason: reason, Below: calls.NoAnswerBelow(a.Calls.Latest())}
	}
	return nil
}

// MarkNoAnswerBelow names, in t's metadata.murmur.noAnswerBelow, the members the attempt called that
// gave no answer, for a task that answers all the same (SPEC), so its caller reads the answer with a
// gap line.
func (a *Attempt) MarkNoAnswerBelow(t *a2a.Task) {
	if below := calls.NoAnswerBelow(a.Calls.Latest()); len(below) > 0 {
		ids.Set(ids.Murmur(t.Metadata), ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(below))
	}
}

// Outstanding reports whether calls or delegations are still out, or ended and not yet delivered.
func (a *Attempt) Outstanding() bool { return calls.Outstanding(a.Calls, a.Delegations) }

// Resume waits for the attempt's calls and delegations and returns the continuation (calls.Resume);
// status shows the wait.
func (a *Attempt) Resume(ctx context.Context, status func(text string)) (string, []map[string]any, error) {
	return calls.Resume(ctx, a.Calls, a.Delegations, status)
}

// Completed asks the on-task-end hooks whether the task, which answered, should be reopened: the
// message to continue with when one asks, the reopen counted.
func (a *Attempt) Completed(ctx context.Context, answer string) (string, bool) {
	return a.taskEnd(ctx, hooks.TaskEnd{Task: a.task, Status: "completed", Answer: answer})
}

// Reopen asks the on-task-end hooks about an attempt that ended without an answer (its model called
// end-without-answer, which the call tracker accepted): the hooks are told exit status no_answer and the
// reason. When one reopens the task, the tracker withdraws the end-without-answer, so the reopened
// attempt may answer or end without an answer again, and the message to continue with is returned, the
// reopen counted. Every transport calls it where an attempt ends no_answer, before the task ends.
func (a *Attempt) Reopen(ctx context.Context) (string, bool) {
	reason, ended := a.Calls.NoAnswer()
	if !ended {
		return "", false
	}
	msg, ok := a.taskEnd(ctx, hooks.TaskEnd{Task: a.task, Status: "no_answer", Reason: reason})
	if ok {
		a.Calls.ReopenNoAnswer()
	}
	return msg, ok
}

// taskEnd asks the on-task-end hooks about end, filled in with the task's trust and reopens so far; the
// reopen counted when one asks (package staged writes task_reopened, or hook_reopen_refused past
// lifecycle.max_task_reopens).
func (a *Attempt) taskEnd(ctx context.Context, end hooks.TaskEnd) (string, bool) {
	end.Trust, end.Reopens = a.Trust(), a.cfg.Reopens()
	msg, ok := a.cfg.TaskEnd(ctx, end)
	if ok {
		a.cfg.Reopened()
	}
	return msg, ok
}
