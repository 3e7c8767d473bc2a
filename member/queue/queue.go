// Package queue keeps the state of a session's tasks, apart from the session's own: each task from its
// admission to its settled end, queued in order of admission (some still being stored), then running,
// then ending (its end handed to the store, not yet durable), and the attempt of the running agent
// task.
//
// It decides nothing and waits for nothing. A Tasks is not safe for concurrent use: the session holds
// its lock around every call, and around every change of a Run's fields but ID, Cancel and Done, so that
// its tasks change in one step with the session's own state (closed, past its deadline).
package queue

import (
	"context"
	"slices"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/attempt"
)

// Run is a task from the moment Next takes it from the queue until its end is settled.
type Run struct {
	ID     a2a.TaskID
	Cancel context.CancelCauseFunc // ends the context Next returned with it
	Done   chan struct{}           // closed once its end is durable and settled

	Task     *a2a.Task // the task as the executor holds it; set once it runs
	Canceled bool      // Cancel canceled it
	// Attempt is the attempt of an agent task that runs, which call-member, delegate-task and
	// end-without-answer answer through; nil outside one.
	Attempt *attempt.Attempt
	// CallsLeft counts the member tasks still running when an attempt that was canceled ended, for the
	// cancel's status message.
	CallsLeft int
}

// Tasks is the state of a session's tasks.
type Tasks struct {
	queue      []a2a.TaskID             // in order of admission, including tasks still being stored
	unstored   map[a2a.TaskID]bool      // queued tasks whose Create has not returned: Next waits for them
	submitted  map[a2a.TaskID]time.Time // when each task the session holds arrived
	continuing map[a2a.TaskID]bool      // the held tasks sent into an existing context: only they read its history
	running    *Run                     // nil between tasks
	ending     map[a2a.TaskID]*Run      // the tasks that ran, whose ends wait for their commit
}

// New returns the state of a session that holds no task.
func New() *Tasks {
	return &Tasks{unstored: map[a2a.TaskID]bool{}, submitted: map[a2a.TaskID]time.Time{},
		continuing: map[a2a.TaskID]bool{}, ending: map[a2a.TaskID]*Run{}}
}

// Hold notes that the session holds task id, which arrived at, until Forget: it is admitted, and its
// duration is measured from at.
func (q *Tasks) Hold(id a2a.TaskID, at time.Time) { q.submitted[id] = at }

// Holds reports whether the session holds task id.
func (q *Tasks) Holds(id a2a.TaskID) bool {
	_, ok := q.submitted[id]
	return ok
}

// Add puts task id, held, at the end of the queue. Next does not start it before Stored unless stored
// is true; continues says it was sent into an existing context.
func (q *Tasks) Add(id a2a.TaskID, continues, stored bool) {
	q.queue = append(q.queue, id)
	if continues {
		q.continuing[id] = true
	}
	if !stored {
		q.unstored[id] = true
	}
}

// IDs is the queue, in order of admission, tasks still being stored included. The caller must not
// change it.
func (q *Tasks) IDs() []a2a.TaskID { return q.queue }

// Stored notes that task id is stored, so Next may start it, and reports whether it is still queued:
// Clear may have emptied the queue while it was being stored.
func (q *Tasks) Stored(id a2a.TaskID) bool {
	delete(q.unstored, id)
	return slices.Contains(q.queue, id)
}

// Queued returns the ids of the queued tasks that are stored, in order; a task still being stored is
// left to the Send that stores it.
func (q *Tasks) Queued() []a2a.TaskID {
	queued := make([]a2a.TaskID, 0, len(q.queue))
	for _, id := range q.queue {
		if !q.unstored[id] {
			queued = append(queued, id)
		}
	}
	return queued
}

// Dequeue takes task id out of the queue when it waits there stored, and reports whether it did; the
// session still holds it, until its end is settled (Forget).
func (q *Tasks) Dequeue(id a2a.TaskID) bool {
	i := slices.Index(q.queue, id)
	if i < 0 || q.unstored[id] {
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	return true
}

// Clear empties the queue, whose tasks a shutdown or the deadline ends; the tasks still being stored
// learn it from Stored.
func (q *Tasks) Clear() { q.queue = nil }

// Drop forgets ids, tasks that leave the session without running (their Create failed, or another
// replica took them): out of the queue, no longer held.
func (q *Tasks) Drop(ids ...a2a.TaskID) {
	gone := make(map[a2a.TaskID]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
		q.Forget(id)
	}
	q.queue = slices.DeleteFunc(q.queue, func(id a2a.TaskID) bool { return gone[id] })
}

// Forget forgets task id, whose end is durable, or which left the session: it returns when the task
// arrived, held false when the session did not hold it.
func (q *Tasks) Forget(id a2a.TaskID) (at time.Time, held bool) {
	at, held = q.submitted[id]
	delete(q.submitted, id)
	delete(q.continuing, id)
	return at, held
}

// Continues reports whether task id was sent into an existing context.
func (q *Tasks) Continues(id a2a.TaskID) bool { return q.continuing[id] }

// Next takes the head of the queue, once it is stored, as the running task: ok false when the queue is
// empty or its head is being stored. The context it returns, the task's, derives from base and ends with
// the Run's Cancel.
func (q *Tasks) Next(base context.Context) (ctx context.Context, r *Run, ok bool) {
	if len(q.queue) == 0 || q.unstored[q.queue[0]] {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(base)
	r = &Run{ID: q.queue[0], Cancel: cancel, Done: make(chan struct{})}
	q.queue = q.queue[1:]
	q.running = r
	return ctx, r, true
}

// Running returns the running task; nil between tasks.
func (q *Tasks) Running() *Run { return q.running }

// Hand moves r, the running task, to the ending tasks: its end is handed to the store. Without an end
// (it vanished before it ran), it only stops running.
func (q *Tasks) Hand(r *Run, ended bool) {
	q.running = nil
	if ended {
		q.ending[r.ID] = r
	}
}

// Handed returns the task with id whose end was handed to the store and is not settled yet; nil when
// there is none.
func (q *Tasks) Handed(id a2a.TaskID) *Run { return q.ending[id] }

// Settled forgets task id as ending: its end is durable and settled.
func (q *Tasks) Settled(id a2a.TaskID) { delete(q.ending, id) }

// Cancel cancels task id if it runs, and returns it, or the task with id whose end was handed to the
// store: the Run whose Done a cancel waits for. Nil when id neither runs nor ran.
func (q *Tasks) Cancel(id a2a.TaskID) *Run {
	if r := q.running; r != nil && r.ID == id {
		r.Canceled = true
		r.Cancel(context.Canceled)
		return r
	}
	return q.ending[id]
}

// Idle reports whether no task runs and none is queued.
func (q *Tasks) Idle() bool { return q.running == nil && len(q.queue) == 0 }

// Quiet reports whether no task runs and no end waits for its commit.
func (q *Tasks) Quiet() bool { return q.running == nil && len(q.ending) == 0 }
