package delegate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/usage"
	"github.com/murmur-run/murmur/runtimetools"
)

// PrefixDelegation starts every delegation id (DESIGN §6).
const PrefixDelegation = "dlg_"

// closeWait bounds how long ending a sub-session may take once its task was cancelled.
const closeWait = 30 * time.Second

// Sub is one running sub-session, as the session core hands it back from Config.Start.
type Sub interface {
	// ID is the sub-session's ses_ id.
	ID() string
	// Send gives the sub-session its one task, with the calling task's trust class, and returns its id.
	Send(ctx context.Context, text string, trust ids.Trust) (string, error)
	// Wait returns once the task has ended, or when ctx ends (then Ended is false).
	Wait(ctx context.Context, task string) (Ending, error)
	// Cancel cancels the task and waits for it to stop.
	Cancel(ctx context.Context, task string) error
	// Close ends the sub-session: its records get session_end, its store is closed.
	Close(ctx context.Context) error
}

// Ending is how a sub-session's task ended.
type Ending struct {
	Ended   bool
	Status  runtimetools.CallStatus // completed, failed, canceled, rejected
	Answer  string                  // the response artifact of a completed task
	Message string                  // the status message
	// Usage is the task's metadata.murmur.usage, when it reports one.
	Usage *usage.Usage
}

// StartSpec is what the core needs to start one sub-session.
type StartSpec struct {
	Entry      Entry
	Delegation string // dlg_…
	Workdir    string // delegations/<dlg id>/ under the delegating session's workdir
	Depth      int    // the sub-session's depth: 1 for a formation member's sub-capsule
}

// Config is what a task's delegations are given by the session: plain values and callbacks.
type Config struct {
	Entries      []Entry   // capabilities.spawn.allow, resolved, in its order
	Depth        int       // the delegating session's depth: 0 for a formation member
	DeadlineSecs int       // lifecycle.delegation_deadline_secs: how long one delegation may take
	Workdir      string    // the delegating session's workdir
	Trust        ids.Trust // the calling task's trust class, which the sub-session's task carries
	// Start starts one sub-session (the core's member.Start with the derived config).
	Start func(StartSpec) (Sub, error)
	// Record writes one record of the task (delegation_start, delegation).
	Record records.WriteFunc
	// Ended, when set, is told how each delegation ended (metrics).
	Ended func(capsule string, status runtimetools.CallStatus)
	// Caused, when set, is told the usage of each delegation's task once it has stopped, by delegation
	// id: the calling task's caused tokens.
	Caused func(task, delegation string, u usage.Usage)
}

// Names returns the bare names of entries, in spawn.allow order: delegate-task's enum.
func Names(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

type delegation struct {
	id, capsule string
	sub         Sub
	subTask     string
	started     time.Time

	calls.Mark
	status runtimetools.CallStatus // completed, failed, canceled, timed_out, abandoned
	output string
}

// Tracker holds the delegations of one running task. Their goroutines end when the task does.
type Tracker struct {
	cfg  Config
	ctx  context.Context // ends with the calling task's attempt
	book *calls.Ledger[*delegation]
	wg   sync.WaitGroup
}

// Start returns the tracker of one attempt of task; ctx ends with the attempt.
func Start(ctx context.Context, cfg Config, task string) *Tracker {
	return &Tracker{cfg: cfg, ctx: ctx, book: calls.NewLedger(calls.LedgerConfig[*delegation]{
		Task: task, Type: records.TypeDelegation, Record: cfg.Record,
		Fields: func(d *delegation) map[string]any {
			rec := map[string]any{"delegation_id": d.id, "capsule": d.capsule, "status": string(d.status), "delivered": d.Delivered(),
				"duration_secs": int64(time.Since(d.started) / time.Second)}
			if d.sub != nil {
				rec["sub_session"] = d.sub.ID()
				rec["sub_task"] = d.subTask
			}
			return rec
		},
		Ended: func(d *delegation) {
			// The delegating task's span (the attempt's context's) says how each delegation ended.
			trace.SpanFromContext(ctx).AddEvent(conv.EventDelegationEnded, trace.WithAttributes(conv.DelegationID.String(d.id),
				conv.DelegationCapsule.String(d.capsule), conv.DelegationStatus.String(string(d.status))))
			if cfg.Ended != nil {
				cfg.Ended(d.capsule, d.status)
			}
		}})}
}

// Delegate hands text to the sub-capsule named name (runtimetools.Delegator): it starts the sub-session,
// gives it the task and returns once the sub-session holds it. A refusal (nothing started, nothing
// recorded) is an error; a sub-session that could not be started is a failed start, recorded.
func (tc *Tracker) Delegate(ctx context.Context, name, text string) (runtimetools.DelegationStart, error) {
	i := slices.IndexFunc(tc.cfg.Entries, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return runtimetools.DelegationStart{}, fmt.Errorf("'delegate-task' has no sub-capsule %q: the capsules this one may hand tasks to are %s.", name, strings.Join(Names(tc.cfg.Entries), ", "))
	}
	if strings.TrimSpace(text) == "" {
		return runtimetools.DelegationStart{}, fmt.Errorf("'delegate-task' needs a task: the whole of what %s is told.", name)
	}
	if tc.cfg.Depth >= MaxDepth {
		return runtimetools.DelegationStart{}, fmt.Errorf("'delegate-task' cannot hand a task on from depth %d: a chain of delegations goes at most %d deep (E-CAP-020). Do the work yourself.", tc.cfg.Depth, MaxDepth)
	}
	if tc.ctx.Err() != nil {
		return runtimetools.DelegationStart{}, errors.New("'delegate-task' is answered only while a task runs; this task is ending")
	}
	e := tc.cfg.Entries[i]
	d := &delegation{id: ids.New(PrefixDelegation), capsule: name, started: time.Now()}
	// The delegate-task call's span names the delegation; the sub-session's task span is its child, as
	// ctx carries it through Send.
	trace.SpanFromContext(ctx).SetAttributes(conv.DelegationID.String(d.id), conv.DelegationCapsule.String(name))
	st := runtimetools.DelegationStart{ID: d.id, Capsule: name}
	fail := func(why string) (runtimetools.DelegationStart, error) {
		tc.book.Add(d)
		tc.end(d, runtimetools.CallStatusFailed, why, true)
		st.Status, st.Output = runtimetools.CallStatusFailed, why
		return st, nil
	}
	sub, err := tc.cfg.Start(StartSpec{Entry: e, Delegation: d.id, Depth: tc.cfg.Depth + 1,
		Workdir: filepath.Join(tc.cfg.Workdir, "delegations", d.id)})
	if err != nil {
		return fail(fmt.Sprintf("%s could not be started: %v", name, err))
	}
	d.sub = sub
	task, err := sub.Send(ctx, text, tc.cfg.Trust)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), closeWait)
		_ = sub.Close(cctx) // the sub-session's records tell of its close; the task it refused is the error
		cancel()
		return fail(fmt.Sprintf("%s did not take the task: %v", name, err))
	}
	d.subTask = task
	tc.book.Add(d)
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = tc.cfg.Record(records.TypeDelegationStart, tc.book.Task(), map[string]any{"delegation_id": d.id, "capsule": name,
		"sub_session": sub.ID(), "sub_task": task, "depth": tc.cfg.Depth + 1})
	tc.wg.Go(func() { tc.watch(d) })
	st.Status = runtimetools.CallStatusStarted
	return st, nil
}

// watch waits for the sub-session's task to end, the delegation's deadline to pass (the task is then
// cancelled: timed_out) or the calling task to end (cancelled too: abandoned), then closes the
// sub-session and reports the outcome.
func (tc *Tracker) watch(d *delegation) {
	secs := tc.cfg.DeadlineSecs
	wctx, cancel := context.WithTimeout(tc.ctx, time.Duration(secs)*time.Second)
	e, err := d.sub.Wait(wctx, d.subTask)
	cancel()
	var status runtimetools.CallStatus
	output := ""
	switch {
	case err == nil && e.Ended:
		status = e.Status
		if status == runtimetools.CallStatusRejected {
			status = runtimetools.CallStatusFailed
		}
		output = e.Message
		if status == runtimetools.CallStatusCompleted {
			output = e.Answer
		} else if output == "" {
			output = fmt.Sprintf("%s's task ended %s", d.capsule, status)
		}
	case tc.ctx.Err() != nil:
		status, output = runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended before %s finished; its task was cancelled", d.capsule)
	case err != nil && wctx.Err() == nil:
		status, output = runtimetools.CallStatusFailed, fmt.Sprintf("%s's task could not be read: %v", d.capsule, err)
	default:
		status, output = runtimetools.CallStatusTimedOut, fmt.Sprintf("%s did not finish within %ds (lifecycle.delegation_deadline_secs); its task was cancelled.", d.capsule, secs)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), closeWait)
	if !e.Ended {
		_ = d.sub.Cancel(cctx, d.subTask)  // one that cannot be canceled ends with the sub-session's Close below
		e, _ = d.sub.Wait(cctx, d.subTask) // what it used until it stopped
	}
	if e.Usage != nil && tc.cfg.Caused != nil {
		tc.cfg.Caused(tc.book.Task(), d.id, *e.Usage)
	}
	_ = d.sub.Close(cctx) // the outcome is decided; the sub-session's own records tell of its close
	ccancel()
	tc.end(d, status, output, false)
}

// end records how a delegation ended. One that ended in its own tool call is delivered at once.
func (tc *Tracker) end(d *delegation, status runtimetools.CallStatus, output string, inToolCall bool) {
	tc.book.End(d, inToolCall, func() { d.status, d.output = status, output })
}

// Pending returns the delegations still out and those ended but not yet delivered, and a channel
// closed at the next change.
func (tc *Tracker) Pending() (out, undelivered int, changed chan struct{}) { return tc.book.Pending() }

// Round takes the ended, undelivered delegations, in the order they were made, and marks them
// delivered.
func (tc *Tracker) Round() []calls.DelegationOutcome {
	taken, _ := tc.book.Round()
	var round []calls.DelegationOutcome
	for _, d := range taken {
		round = append(round, calls.DelegationOutcome{ID: d.id, Capsule: d.capsule, Status: d.status, Output: d.output})
	}
	return round
}

// Finish ends the delegations at the end of the task's attempt: every sub-session still working is
// cancelled and closed (abandoned), and every delegation not delivered is recorded delivered: false.
func (tc *Tracker) Finish(cancel context.CancelFunc) {
	cancel()
	tc.wg.Wait()
	tc.book.Close(func(d *delegation) { d.status, d.output = runtimetools.CallStatusAbandoned, "the calling task ended" })
}
