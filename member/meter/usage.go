package meter

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/usage"
)

// taskUsage is what the running task used (member/usage): the tokens of its own inference calls, and
// the latest usage read of each task or sub-session it caused, by the id of the call or delegation
// that caused it. A call's usage is replaced at each read, so a callee that still runs counts what it
// has used so far, and a callee that ended counts what it used in all.
type taskUsage struct {
	self   usage.Tokens
	caused map[string]usage.Usage
}

func (u *taskUsage) usage() usage.Usage {
	var caused usage.Tokens
	var tasks int64
	for _, c := range u.caused {
		caused = caused.Add(c.Total)
		tasks += 1 + c.Tasks
	}
	return usage.Of(u.self, caused, tasks)
}

// Caused notes the usage of a task or sub-session that the running task task caused, read now: key is
// the call or delegation that caused it, whose earlier reading u replaces. A reading for a task that is
// not running (its calls are ended before it ends, so none comes late) is dropped.
func (m *Meter) Caused(task, key string, u usage.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.progress
	if p == nil || p.Task != task {
		return
	}
	if p.usage.caused == nil {
		p.usage.caused = map[string]usage.Usage{}
	}
	p.usage.caused[key] = u
}

// Usage returns what the running task has used so far, and false outside a task.
func (m *Meter) Usage() (usage.Usage, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.progress == nil {
		return usage.Usage{}, false
	}
	return m.progress.usage.usage(), true
}

// Stamp writes in t's metadata.murmur.usage what t has used so far, when t is the running task: each
// stored change of the task (its WORKING messages, a question to its sender) then shows it. The caller
// holds whatever lock guards t. A task that is not running (a rejection in a flood) takes no lock.
func (m *Meter) Stamp(t *a2a.Task) {
	if id := m.running.Load(); id == nil || *id != string(t.ID) {
		return
	}
	m.mu.Lock()
	p := m.progress
	if p == nil || p.Task != string(t.ID) {
		m.mu.Unlock()
		return
	}
	u := p.usage.usage()
	m.mu.Unlock()
	usage.Set(meta(t), u)
}

// traceOf writes in t's metadata.murmur.trace_id the trace ctx's span belongs to, when that span is
// recorded (tracing is on and the sampler kept it): the task's run is then found in the trace, and the
// console links to it.
func traceOf(ctx context.Context, t *a2a.Task) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	ids.Set(meta(t), ids.MetaTraceID, span.SpanContext().TraceID().String())
}

// meta is t's metadata.murmur, made when it has none.
func meta(t *a2a.Task) map[string]any {
	if m := ids.Murmur(t.Metadata); m != nil {
		return m
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	m := map[string]any{}
	t.Metadata[ids.Meta] = m
	return m
}
