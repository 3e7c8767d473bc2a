package admit

import (
	"sync/atomic"

	"github.com/murmur-run/murmur/member/capsule"
)

// DefaultQueueSize bounds the FIFO of task_acceptance: queue when the capsule sets no queue_size.
const DefaultQueueSize = 16

// Gate admits tasks without a lock and without waiting for the disk. An admitted task holds a place
// until it ends.
type Gate struct {
	// limit is how many tasks the session holds at once: the running one, plus queue_size waiting under
	// task_acceptance: queue.
	limit   int64
	busy    string                 // the status text of a task refused for want of a place
	held    atomic.Int64           // admitted tasks that have not ended
	refusal atomic.Pointer[string] // once set, the status text every new task is rejected with
}

// Refusal is why the gate turned a task away: the status text the task is rejected with, and whether
// it was for want of a place (Busy), which a caller may offer the task again for, rather than because
// the session refuses all work. Busy is what says so, never the text.
type Refusal struct {
	Text string
	Busy bool
}

// New returns the gate of a session running c; busy is the status text of a task it has no place for.
func New(c *capsule.Capsule, busy string) *Gate {
	g := &Gate{limit: 1, busy: busy}
	if c.TaskAcceptance == capsule.AcceptQueue {
		size := c.QueueSize
		if size <= 0 {
			size = DefaultQueueSize
		}
		g.limit += int64(size)
	}
	return g
}

// Take admits a task, or returns why it is rejected.
func (g *Gate) Take() (refusal Refusal, ok bool) {
	for {
		if r := g.refusal.Load(); r != nil {
			return Refusal{Text: *r}, false
		}
		n := g.held.Load()
		if n >= g.limit {
			return Refusal{Text: g.busy, Busy: true}, false
		}
		if g.held.CompareAndSwap(n, n+1) {
			return Refusal{}, true
		}
	}
}

// Release gives back the place of a task that ended (or was never stored).
func (g *Gate) Release() { g.held.Add(-1) }

// Refuse makes every later Take fail with text. The first refusal stays: a session that reached its
// deadline and is then closed keeps rejecting with the deadline's text.
func (g *Gate) Refuse(text string) { g.refusal.CompareAndSwap(nil, &text) }

// Refused reports whether Refuse was called.
func (g *Gate) Refused() bool { return g.refusal.Load() != nil }

// Free is how many more tasks the gate would admit now; 0 once it refuses every task.
func (g *Gate) Free() int {
	if g.Refused() {
		return 0
	}
	return int(max(g.limit-g.held.Load(), 0))
}

// Limit is how many tasks the gate admits at once: the one running and the queue's.
func (g *Gate) Limit() int { return int(g.limit) }
