package runtimetools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/murmur-run/murmur/member/records"
)

// StatusSnapshot is what a session knows of itself at one moment; SessionStatus renders it as SPEC's
// object. Zero limits mean "not set".
type StatusSnapshot struct {
	Now          time.Time
	SessionStart time.Time
	TaskStart    time.Time // zero outside a task
	Deadline     time.Time // zero: no deadline

	TurnsUsed int
	TurnsCap  int

	KeepWorking *Counter // nil: the capsule does not set lifecycle.keep_working
	DoneCheck   *Counter // nil: the capsule does not set lifecycle.done_check

	Context *ContextSnapshot // nil: before the first turn

	Tokens TokenTotals

	SpendTokens  int64
	SpendCeiling int64

	// Quota is the harness's latest window per name under transport: process, in the order the names
	// were first reported; empty until it reports one, and always under transport: http.
	Quota []QuotaWindow
}

// QuotaWindow is one subscription window a harness reported (SPEC's quota[]). A nil or empty field was
// not reported and is left out.
type QuotaWindow struct {
	Name          string
	Used          *float64
	ResetsAt      string // RFC 3339 UTC to the second
	WindowMinutes *int64
	State         string
}

// Counter is a count against a limit.
type Counter struct{ Used, Limit int }

// ContextSnapshot is the conversation size as the compaction check last counted it.
type ContextSnapshot struct {
	UsedTokens   int64
	WindowTokens int    // 0: the driver choice has no window
	BudgetTokens int    // meaningful only with a window
	BudgetBasis  string // "max_input_tokens" or "context_window_less_output_cap"
	MeasuredBy   string // "actual" or "estimate"
}

// TokenTotals are the sums over the session's inference records. A Has flag is false while no record
// carried that count.
type TokenTotals struct {
	Input, Output, Cached, CacheWrite             int64
	HasInput, HasOutput, HasCached, HasCacheWrite bool
	UnreportedCalls                               int
}

// Add counts one inference call: what its provider reported (reported; the cache counts only when
// cacheReported), or one more call it reported nothing of.
func (t *TokenTotals) Add(reported, cacheReported bool, in, out, cached, cacheWrite int64) {
	if !reported {
		t.UnreportedCalls++
		return
	}
	t.Input += in
	t.Output += out
	t.HasInput, t.HasOutput = true, true
	if cacheReported {
		t.Cached += cached
		t.CacheWrite += cacheWrite
		t.HasCached, t.HasCacheWrite = true, true
	}
}

// StatusSource is what session-status needs of the session.
type StatusSource interface {
	StatusSnapshot() StatusSnapshot
}

// SessionStatus is the session-status tool.
type SessionStatus struct {
	Source   StatusSource
	Recorder Recorder
}

// Manifest describes session-status: no input, one JSON object out.
func (t *SessionStatus) Manifest() Manifest {
	return NativeManifest("session-status",
		"Reports the time the session has run and has left, its turns, context, tokens and spend, measured at the moment of the call. Takes no input; returns one JSON object. A limit that is not set reads \"none\"; a count the runtime does not have reads \"unknown\".",
		json.RawMessage(`{"type":"object","properties":{}}`))
}

// Run returns the status object and writes one session_status record carrying it.
func (t *SessionStatus) Run(_ context.Context, call Call) (Result, error) {
	obj := renderStatus(t.Source.StatusSnapshot())
	out, err := json.Marshal(obj)
	if err != nil {
		return Result{}, err
	}
	if err := t.Recorder.Write(records.TypeSessionStatus, call.Task, map[string]any{"status": obj}); err != nil {
		return Result{}, err
	}
	return Result{Status: StatusOK, Output: string(out), Data: obj}, nil
}

// secs is whole seconds, rounded down, never negative.
func secs(d time.Duration) int64 {
	if d < 0 {
		return 0
	}
	return int64(d / time.Second)
}

// renderStatus builds SPEC's session-status object from a snapshot. Field order follows SPEC.
func renderStatus(s StatusSnapshot) orderedObject {
	timeObj := orderedObject{{"elapsed_secs", secs(s.Now.Sub(s.SessionStart))}}
	if s.TaskStart.IsZero() {
		timeObj = append(timeObj, kv{"task_elapsed_secs", "unknown"})
	} else {
		timeObj = append(timeObj, kv{"task_elapsed_secs", secs(s.Now.Sub(s.TaskStart))})
	}
	if s.Deadline.IsZero() {
		timeObj = append(timeObj, kv{"deadline", "none"})
	} else {
		timeObj = append(timeObj, kv{"deadline", orderedObject{
			{"at", s.Deadline.UTC().Format(time.RFC3339)},
			{"left_secs", secs(s.Deadline.Sub(s.Now))},
		}})
	}
	var turnsCap any = "none"
	if s.TurnsCap > 0 {
		turnsCap = s.TurnsCap
	}
	out := orderedObject{
		{"time", timeObj},
		{"turns", orderedObject{{"used", s.TurnsUsed}, {"cap", turnsCap}}},
		{"keep_working", counter(s.KeepWorking)},
		{"done_check", counter(s.DoneCheck)},
	}
	if c := s.Context; c == nil {
		out = append(out, kv{"context", "unknown"})
	} else {
		ctx := orderedObject{{"used_tokens", c.UsedTokens}}
		if c.WindowTokens > 0 {
			ctx = append(ctx, kv{"window_tokens", c.WindowTokens}, kv{"budget_tokens", c.BudgetTokens}, kv{"budget_basis", c.BudgetBasis})
		} else {
			ctx = append(ctx, kv{"window_tokens", "none"}, kv{"budget_tokens", "none"}, kv{"budget_basis", "none"})
		}
		ctx = append(ctx, kv{"measured_by", c.MeasuredBy})
		out = append(out, kv{"context", ctx})
	}
	if len(s.Quota) > 0 {
		var windows []orderedObject
		for _, w := range s.Quota {
			o := orderedObject{{"name", w.Name}}
			if w.Used != nil {
				o = append(o, kv{"used", *w.Used})
			}
			if w.ResetsAt != "" {
				o = append(o, kv{"resets_at", w.ResetsAt})
			}
			if w.WindowMinutes != nil {
				o = append(o, kv{"window_minutes", *w.WindowMinutes})
			}
			if w.State != "" {
				o = append(o, kv{"state", w.State})
			}
			windows = append(windows, o)
		}
		out = append(out, kv{"quota", windows})
	}
	tk := s.Tokens
	out = append(out, kv{"tokens", orderedObject{
		{"input", known(tk.Input, tk.HasInput)},
		{"output", known(tk.Output, tk.HasOutput)},
		{"cached", known(tk.Cached, tk.HasCached)},
		{"cache_write", known(tk.CacheWrite, tk.HasCacheWrite)},
		{"unreported_calls", tk.UnreportedCalls},
	}})
	var ceiling any = "none"
	if s.SpendCeiling > 0 {
		ceiling = s.SpendCeiling
	}
	out = append(out, kv{"spend", orderedObject{{"tokens", s.SpendTokens}, {"ceiling", ceiling}, {"machine", "none"}}})
	return out
}

func counter(c *Counter) any {
	if c == nil {
		return "none"
	}
	return orderedObject{{"used", c.Used}, {"left", max(c.Limit-c.Used, 0)}}
}

func known(n int64, has bool) any {
	if !has {
		return "unknown"
	}
	return n
}

// kv is one member of an orderedObject.
type kv struct {
	Key   string
	Value any
}

// orderedObject is a JSON object that keeps its members in the order SPEC shows them.
type orderedObject []kv

// MarshalJSON writes the members in order.
func (o orderedObject) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, _ := json.Marshal(m.Key)
		buf = append(buf, k...)
		buf = append(buf, ':')
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		buf = append(buf, v...)
	}
	return append(buf, '}'), nil
}
