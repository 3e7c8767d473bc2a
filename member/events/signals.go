package events

import (
	"sync"

	"github.com/murmur-run/murmur/a2a"
)

// Publisher is told of every change of a task the session has stored, and of the agent loop's
// transient progress (a tool call started or ended). Hub is one: the door streams what it publishes,
// the push notifier delivers what it observes. Both methods must return without waiting for any
// reader; they are called with the session's lock held.
type Publisher interface {
	Publish(t *a2a.Task)
	Progress(id a2a.TaskID, text string, meta map[string]any)
}

// Publish reports a stored change of t to p; a nil p tells nobody.
func Publish(p Publisher, t *a2a.Task) {
	if p != nil {
		p.Publish(t)
	}
}

// Wants reports whether a change of task id reaches anyone through p: a publisher that can tell (the
// Hub) is asked; any other is told of every change; a nil p reaches nobody.
func Wants(p Publisher, id a2a.TaskID) bool {
	if p == nil {
		return false
	}
	w, ok := p.(interface{ Wants(a2a.TaskID) bool })
	return !ok || w.Wants(id)
}

// ToolProgress shows a tool call of a running task on its stream: "tool <name>: running" before the
// call, "tool <name>: <status>" after it. A nil p tells nobody.
func ToolProgress(p Publisher, task, tool, callID, status string) {
	if p == nil {
		return
	}
	p.Progress(a2a.TaskID(task), "tool "+tool+": "+status,
		map[string]any{"murmur": map[string]any{"progress": "tool_call", "tool": tool, "call_id": callID, "status": status}})
}

// Signals wakes the Waits of one task when that task changes, and no other: a change of one task costs
// nothing to the clients blocked on the others. The zero value is ready; it is safe for concurrent use.
type Signals struct {
	mu sync.Mutex
	m  map[a2a.TaskID]*Signal
}

// Signal is what one task's waiters hold until its next change.
type Signal struct {
	ch       chan struct{} // closed when the task changes
	watchers int
}

// Changed is closed at the task's next change.
func (sg *Signal) Changed() <-chan struct{} { return sg.ch }

// Watch returns what is closed at the task's next change; the caller gives it back with Unwatch.
func (ts *Signals) Watch(id a2a.TaskID) *Signal {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[a2a.TaskID]*Signal{}
	}
	sg := ts.m[id]
	if sg == nil {
		sg = &Signal{ch: make(chan struct{})}
		ts.m[id] = sg
	}
	sg.watchers++
	return sg
}

// Unwatch gives back what Watch returned.
func (ts *Signals) Unwatch(id a2a.TaskID, sg *Signal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	sg.watchers--
	if sg.watchers == 0 && ts.m[id] == sg {
		delete(ts.m, id)
	}
}

// Notify wakes the task's watchers.
func (ts *Signals) Notify(id a2a.TaskID) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if sg := ts.m[id]; sg != nil {
		close(sg.ch)
		delete(ts.m, id)
	}
}

// Watched reports whether anyone waits on task id's next change.
func (ts *Signals) Watched(id a2a.TaskID) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.m[id] != nil
}

// NotifyAll wakes the watchers of every task, to read their tasks again: what a lost notification of
// another replica's change would have done.
func (ts *Signals) NotifyAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for id, sg := range ts.m {
		close(sg.ch)
		delete(ts.m, id)
	}
}
