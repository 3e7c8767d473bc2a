package records

import "sync"

// The keys of the trace span a record belongs to (DESIGN §17): the W3C trace id and span id, in hex, of
// the span of the task it is about, so records and spans join.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// maxBound bounds the tasks bound to spans at once: a session runs one task at a time, and a task whose
// task_end is never written (its end not stored) must not keep its entry for ever.
const maxBound = 64

// spans holds the span each traced task's records carry.
type spans struct {
	mu     sync.Mutex // guards byTask
	byTask map[string][2]string
}

// Bind makes every record of task written from now on carry trace_id and span_id (hex), up to and
// including its task_end record, after which the task is unbound. A record whose fields set trace_id
// already keeps its own (a tool call's record carries its tool call's span). Bind again to change the
// span; a task never bound writes its records as before.
func (r *Writer) Bind(task, traceID, spanID string) {
	if task == "" || traceID == "" {
		return
	}
	r.spans.mu.Lock()
	defer r.spans.mu.Unlock()
	if r.spans.byTask == nil {
		r.spans.byTask = map[string][2]string{}
	}
	if _, ok := r.spans.byTask[task]; !ok && len(r.spans.byTask) >= maxBound {
		for k := range r.spans.byTask {
			delete(r.spans.byTask, k) // the oldest is as good as any: all of them ended long ago
			break
		}
	}
	r.spans.byTask[task] = [2]string{traceID, spanID}
}

// addSpan puts the span task is bound to into rec, unless rec carries one; a task_end unbinds the task.
func (s *spans) addSpan(rec map[string]any, typ Type, task string) {
	if task == "" {
		return
	}
	s.mu.Lock()
	ids, ok := s.byTask[task]
	if ok && typ == TypeTaskEnd {
		delete(s.byTask, task)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if _, set := rec[TraceIDKey]; !set {
		rec[TraceIDKey], rec[SpanIDKey] = ids[0], ids[1]
	}
}
