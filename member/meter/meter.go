package meter

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/usage"
	"github.com/murmur-run/murmur/runtimetools"
)

// Config is what a Meter is given: the capsule whose limits it counts against, the clock, and where the
// records and the metrics of an inference call go.
type Config struct {
	Capsule *capsule.Capsule
	Now     func() time.Time
	Started time.Time // when the session started
	// Record writes one record of the session.
	Record records.WriteFunc
	// Calls and Tokens are mur_inference_calls_total (by driver, model and provider) and
	// mur_inference_tokens_total (by driver, model, provider and kind).
	Calls, Tokens *prometheus.CounterVec
}

// Progress is what one task used of its limits, and its tokens (Usage).
type Progress struct {
	Task        string // the task's id
	Start       time.Time
	Turns       int
	KeepWorking int
	DoneCheck   int
	Reopens     int
	Data        json.RawMessage // a data answer (the script driver's data: turn); nil for text

	usage taskUsage
}

// Usage is what the task used: its own tokens and those of the tasks and sub-sessions it caused.
func (p Progress) Usage() usage.Usage { return p.usage.usage() }

// Meter keeps a session's numbers; see the package doc.
type Meter struct {
	cfg     Config
	running atomic.Pointer[string] // the running task's id, read without the lock (Stamp)

	mu       sync.Mutex
	progress *Progress // the running task's; nil outside a task
	tokens   runtimetools.TokenTotals
	spend    int64
	context  *runtimetools.ContextSnapshot
}

// New returns the meter of a session that has used nothing yet.
func New(cfg Config) *Meter { return &Meter{cfg: cfg} }

// BeginTask starts counting the progress of task t, which runs within ctx's span, and returns when it
// started. When that span is recorded, t's metadata.murmur.trace_id names its trace. The caller holds
// whatever lock guards t.
func (m *Meter) BeginTask(ctx context.Context, t *a2a.Task) time.Time {
	traceOf(ctx, t)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress = &Progress{Task: string(t.ID), Start: m.cfg.Now()}
	m.running.Store(&m.progress.Task)
	return m.progress.Start
}

// EndTask stops counting the running task's progress and returns it; t, the task, gets what it used in
// its metadata.murmur.usage (usage.Usage). The caller holds whatever lock guards t.
func (m *Meter) EndTask(t *a2a.Task) Progress {
	m.mu.Lock()
	p := m.progress
	m.progress = nil
	m.running.Store(nil)
	m.mu.Unlock()
	if p == nil {
		return Progress{}
	}
	if p.Task == string(t.ID) {
		usage.Set(meta(t), p.usage.usage())
	}
	return *p
}

// Used returns the running task's turns and the session's spend, read together.
func (m *Meter) Used() (turns int, spend int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.progress != nil {
		turns = m.progress.Turns
	}
	return turns, m.spend
}

// Limit says why the running task may make no more inference calls: all of inference.max_turns used
// (TurnsUsedUp), or the session's spend at inference.max_session_tokens (SpendReached); "" while it may.
// The agent loop ends the task with it, and a hook's run_inference is refused with it.
func (m *Meter) Limit() string {
	inf := m.cfg.Capsule.Inference
	if inf == nil {
		return ""
	}
	turns, spend := m.Used()
	if inf.MaxTurns > 0 && turns >= inf.MaxTurns {
		return TurnsUsedUp(inf.MaxTurns)
	}
	if inf.MaxSessionTokens > 0 && spend >= inf.MaxSessionTokens {
		return SpendReached(spend, inf.MaxSessionTokens)
	}
	return ""
}

// TurnsUsedUp says that a task used all max turns of inference.max_turns.
func TurnsUsedUp(max int) string {
	return fmt.Sprintf("the task used all %d turns of inference.max_turns", max)
}

// SpendReached says that the session's spend reached its inference.max_session_tokens ceiling.
func SpendReached(spend, ceiling int64) string {
	return fmt.Sprintf("the session has spent %d tokens, its inference.max_session_tokens ceiling of %d", spend, ceiling)
}

// TurnsLeft reports whether the running task has a turn left of inference.max_turns.
func (m *Meter) TurnsLeft() bool {
	turns, _ := m.Used()
	limit := m.cfg.Capsule.Inference.MaxTurns
	return limit == 0 || turns < limit
}

// KeepWorking counts one use of lifecycle.keep_working when the capsule sets it and the task has one
// left: how many the task has used and how many are left.
func (m *Meter) KeepWorking() (used, left int, ok bool) {
	kw := m.cfg.Capsule.Lifecycle.KeepWorking
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.progress
	if kw == nil || p == nil || p.KeepWorking >= kw.Limit {
		return 0, 0, false
	}
	p.KeepWorking++
	return p.KeepWorking, kw.Limit - p.KeepWorking, true
}

// CheckFailed counts a reopen for a failed lifecycle.done_check when the task has one left of its
// limit and of lifecycle.max_task_reopens: the done_check reopens the task has used, counting this one
// when ok.
func (m *Meter) CheckFailed() (used int, ok bool) {
	lc := m.cfg.Capsule.Lifecycle
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.progress
	if p == nil {
		return 0, false
	}
	if p.DoneCheck >= lc.DoneCheck.Limit || (lc.MaxTaskReopens != nil && p.Reopens >= *lc.MaxTaskReopens) {
		return p.DoneCheck, false
	}
	p.DoneCheck++
	p.Reopens++
	return p.DoneCheck, true
}

// Reopens is how many times the running task has been reopened.
func (m *Meter) Reopens() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.progress == nil {
		return 0
	}
	return m.progress.Reopens
}

// Reopened counts a reopen of the running task that an on-task-end hook asked for.
func (m *Meter) Reopened() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.progress != nil {
		m.progress.Reopens++
	}
}

// SetData keeps the running task's data answer.
func (m *Meter) SetData(data json.RawMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.progress != nil {
		m.progress.Data = data
	}
}

// Snapshot reports the session's numbers at this moment (runtimetools.StatusSnapshot), with the
// session's deadline and the harness's quota windows.
func (m *Meter) Snapshot(deadline time.Time, quota []runtimetools.QuotaWindow) runtimetools.StatusSnapshot {
	c := m.cfg.Capsule
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := runtimetools.StatusSnapshot{
		Now:          m.cfg.Now(),
		SessionStart: m.cfg.Started,
		Deadline:     deadline,
		Tokens:       m.tokens,
		SpendTokens:  m.spend,
		Quota:        quota,
	}
	if inf := c.Inference; inf != nil {
		snap.TurnsCap = inf.MaxTurns
		snap.SpendCeiling = inf.MaxSessionTokens
	}
	var p Progress
	if m.progress != nil {
		p = *m.progress
		snap.TaskStart = p.Start
		snap.TurnsUsed = p.Turns
	}
	if kw := c.Lifecycle.KeepWorking; kw != nil {
		snap.KeepWorking = &runtimetools.Counter{Used: p.KeepWorking, Limit: kw.Limit}
	}
	if dc := c.Lifecycle.DoneCheck; dc != nil {
		snap.DoneCheck = &runtimetools.Counter{Used: p.DoneCheck, Limit: dc.Limit}
	}
	if m.context != nil {
		cs := *m.context
		snap.Context = &cs
	}
	return snap
}
