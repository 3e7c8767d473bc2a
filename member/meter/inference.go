package meter

import (
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/runtimetools"
)

// Account adds one inference call of the agent loop to the session's numbers, its metrics and its
// records.
func (m *Meter) Account(task, choice string, req driver.InferRequest, resp driver.InferResponse) {
	m.account(task, choice, "", req, resp)
}

// AccountHook adds one run_inference call of a hook (DESIGN §18) as Account does: it counts in the
// task's turns (SPEC: turns.used includes a hook's run-inference) and the spend, and its inference record
// names the hook. It returns the tokens the call used, as the spend ceilings count them.
func (m *Meter) AccountHook(task, choice, hook string, req driver.InferRequest, resp driver.InferResponse) (in, out int64) {
	return m.account(task, choice, hook, req, resp)
}

func (m *Meter) account(task, choice, hook string, req driver.InferRequest, resp driver.InferResponse) (int64, int64) {
	u := resp.Usage
	ch := m.cfg.Capsule.Inference.Choices[choice]
	in, out, used, measured := driver.Measure(req, resp)
	m.mu.Lock()
	turn := req.Turn
	if m.progress != nil {
		m.progress.Turns++
		if hook != "" {
			turn = m.progress.Turns
		}
		// The task's own tokens are what its inference records say: reported counts only.
		m.progress.usage.self.Count(u.Reported, in, out, u.Cached, u.CacheWrite)
	}
	// The spend ceilings count every call, an estimate where the provider reported nothing; the token
	// sums of session-status hold only what providers reported.
	m.spend += in + out
	m.tokens.Add(u.Reported, u.CacheReported, in, out, u.Cached, u.CacheWrite)
	if hook == "" {
		// A hook's call is a conversation of its own: the context check stays the agent's.
		m.context = contextSnapshot(ch, used, measured)
	}
	m.mu.Unlock()

	m.count(choice, ch, u)
	rec := map[string]any{"driver": choice, "model": ch.Model, "turn": turn, "measured_by": measured}
	if hook != "" {
		rec["hook"] = hook
	}
	if u.Reported {
		rec["tokens"] = map[string]any{"input": in, "output": out, "cached": u.Cached, "cache_write": u.CacheWrite}
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = m.cfg.Record(records.TypeInference, task, rec)
	return in, out
}

// HarnessTurn counts one closed turn of the harness as an inference call: the task's turns, the
// session's spend and token sums, the metrics (harness.TransportConfig.Turn).
func (m *Meter) HarnessTurn(task string, u harness.Usage) (int, int64) {
	m.mu.Lock()
	turn := 0
	if m.progress != nil {
		m.progress.Turns++
		turn = m.progress.Turns
		m.progress.usage.self.Count(u.Reported, u.Input, u.Output, u.Cached, u.CacheWrite)
	}
	if u.Reported {
		m.spend += u.Input + u.Output
	}
	m.tokens.Add(u.Reported, u.CacheReported, u.Input, u.Output, u.Cached, u.CacheWrite)
	spend := m.spend
	m.mu.Unlock()
	m.count(harness.DriverName, capsule.Choice{}, driver.Usage{Input: u.Input, Output: u.Output, Cached: u.Cached, CacheWrite: u.CacheWrite, Reported: u.Reported})
	return turn, spend
}

// contextSnapshot is the budget check of SPEC's context fields for one choice.
func contextSnapshot(ch capsule.Choice, used int64, measured string) *runtimetools.ContextSnapshot {
	cs := &runtimetools.ContextSnapshot{UsedTokens: used, WindowTokens: ch.ContextWindow, MeasuredBy: measured}
	cs.BudgetTokens, cs.BudgetBasis = ch.Budget()
	return cs
}

// Compact shortens the conversation when the last check found it past the threshold of its budget
// (driver.CompactOver), and records what went.
func (m *Meter) Compact(task string, req *driver.InferRequest, hist *int) {
	m.mu.Lock()
	cs := m.context
	m.mu.Unlock()
	if cs == nil || cs.WindowTokens == 0 {
		return
	}
	c, ok := driver.CompactOver(req, hist, cs.UsedTokens, int64(cs.BudgetTokens), m.cfg.Capsule.Inference.Compaction.Threshold)
	if !ok {
		return
	}
	m.mu.Lock()
	m.context = &runtimetools.ContextSnapshot{UsedTokens: c.After, WindowTokens: cs.WindowTokens,
		BudgetTokens: cs.BudgetTokens, BudgetBasis: cs.BudgetBasis, MeasuredBy: "estimate"}
	m.mu.Unlock()
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = m.cfg.Record(records.TypeCompaction, task, map[string]any{
		"tokens_before": cs.UsedTokens, "tokens_before_source": cs.MeasuredBy, "tokens_after": c.After,
		"budget_tokens": cs.BudgetTokens, "threshold": c.Threshold, "removed_messages": c.Removed})
}

// count counts a call of driver choice label (ch) in the metrics, and the tokens its provider reported.
func (m *Meter) count(label string, ch capsule.Choice, u driver.Usage) {
	model, provider := Labels(ch)
	m.cfg.Calls.WithLabelValues(label, model, provider).Inc()
	if !u.Reported {
		return
	}
	for kind, n := range map[string]int64{"input": u.Input, "output": u.Output, "cached": u.Cached, "cache_write": u.CacheWrite} {
		if n > 0 {
			m.cfg.Tokens.WithLabelValues(label, model, provider, kind).Add(float64(n))
		}
	}
}

// Labels are the model and provider labels of a driver choice's inference series: its model and its
// driver, named as the chat span's gen_ai.request.model and gen_ai.provider.name name them (openai,
// anthropic, murmur.script). A driver that names no model (the script driver) has "" for it, and the
// harness of transport: process, which reports neither, "" for both. Both are fixed by the choice, so
// they add no series to the driver label's: a member has at most one series per choice of its capsule.
func Labels(ch capsule.Choice) (model, provider string) {
	switch ch.Driver {
	case "":
		return "", ""
	case capsule.DriverScript:
		return ch.Model, "murmur.script"
	}
	return ch.Model, ch.Driver
}
