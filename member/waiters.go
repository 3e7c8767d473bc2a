package member

import (
	"sync"

	"github.com/murmur-run/murmur/a2a"
)

// taskSignals wakes the Waits of one task when that task changes, and no other: a change of one task
// costs nothing to the clients blocked on the others.
type taskSignals struct {
	mu sync.Mutex
	m  map[a2a.TaskID]*taskSignal
}

type taskSignal struct {
	ch       chan struct{} // closed when the task changes
	watchers int
}

// watch returns what is closed at the task's next change; the caller gives it back with unwatch.
func (ts *taskSignals) watch(id a2a.TaskID) *taskSignal {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[a2a.TaskID]*taskSignal{}
	}
	sg := ts.m[id]
	if sg == nil {
		sg = &taskSignal{ch: make(chan struct{})}
		ts.m[id] = sg
	}
	sg.watchers++
	return sg
}

func (ts *taskSignals) unwatch(id a2a.TaskID, sg *taskSignal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	sg.watchers--
	if sg.watchers == 0 && ts.m[id] == sg {
		delete(ts.m, id)
	}
}

// notify wakes the task's watchers.
func (ts *taskSignals) notify(id a2a.TaskID) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if sg := ts.m[id]; sg != nil {
		close(sg.ch)
		delete(ts.m, id)
	}
}
