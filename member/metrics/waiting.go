package metrics

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/murmur-run/murmur/a2a"
)

// interrupted are the states of a task that waits for input (A2A's interrupted states).
var interrupted = []a2a.TaskState{a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired}

// stateLabel is a state as the state label spells it: input_required for TASK_STATE_INPUT_REQUIRED.
func stateLabel(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// waiting is the tasks of this member that wait for input, each with the state it waits in. A task is
// counted from the change that interrupted it here and uncounted at its next change, so a task read
// back from the store in an interrupted state (never counted here) is never uncounted either.
type waiting struct {
	n atomic.Int64 // len(tasks), read without the lock: most changes are of tasks that wait for nothing

	mu    sync.Mutex
	tasks map[a2a.TaskID]a2a.TaskState
}

// TaskState notes that task id is now in state, for mur_tasks_waiting_input: the session calls it at
// each status change of a task. A change of a task to a state other than those, while no task waits
// (a rejection in a flood), takes no lock.
func (m *Series) TaskState(id a2a.TaskID, state a2a.TaskState) {
	w := &m.waiting
	if w.n.Load() == 0 && !state.Interrupted() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	was, counted := w.tasks[id]
	if counted && was == state {
		return
	}
	if counted {
		m.WaitingInput.WithLabelValues(stateLabel(was)).Dec()
		delete(w.tasks, id)
		w.n.Add(-1)
	}
	if !state.Interrupted() {
		return
	}
	if w.tasks == nil {
		w.tasks = map[a2a.TaskID]a2a.TaskState{}
	}
	w.tasks[id] = state
	w.n.Add(1)
	m.WaitingInput.WithLabelValues(stateLabel(state)).Inc()
}
