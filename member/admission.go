package member

import (
	"sync/atomic"

	"github.com/murmur-run/murmur/member/capsule"
)

// admission decides whether a new task may enter the session without a lock and without waiting for the
// disk: a flood of senders is refused at the cost of an atomic load while the session's lock is held by
// the executor writing a task's state. An admitted task holds a place until it ends.
type admission struct {
	// limit is how many tasks the session holds at once: the running one, plus queue_size waiting under
	// task_acceptance: queue.
	limit   int64
	held    atomic.Int64           // admitted tasks that have not ended
	refusal atomic.Pointer[string] // once set, the status text every new task is rejected with
}

func newAdmission(c *capsule.Capsule) *admission {
	a := &admission{limit: 1}
	if c.TaskAcceptance == capsule.AcceptQueue {
		size := c.QueueSize
		if size <= 0 {
			size = defaultQueueSize
		}
		a.limit += int64(size)
	}
	return a
}

// take admits a task, or returns the status text of its rejection.
func (a *admission) take() (refusal string, ok bool) {
	for {
		if r := a.refusal.Load(); r != nil {
			return *r, false
		}
		n := a.held.Load()
		if n >= a.limit {
			return BusyMessage, false
		}
		if a.held.CompareAndSwap(n, n+1) {
			return "", true
		}
	}
}

// release gives back the place of a task that ended (or was never stored).
func (a *admission) release() { a.held.Add(-1) }

// refuse makes every later take fail with text. The first refusal stays: a session that reached its
// deadline and is then closed keeps rejecting with the deadline's text.
func (a *admission) refuse(text string) { a.refusal.CompareAndSwap(nil, &text) }
