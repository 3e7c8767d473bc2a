package store

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Replicated is what a store shared by the replicas of one member (DESIGN §16) adds to Tasks: the
// PostgreSQL store opened with a replica name. Every task row has an owner, the replica that runs it
// ("" while nobody has claimed it); a replica holds a lease it renews, and one whose lease lapsed is
// dead to the others, which end its running tasks and release its queued ones.
//
// Guarantees, beyond Tasks':
//   - One owner: a task is run only by its owner. Claim takes unclaimed tasks with FOR UPDATE SKIP
//     LOCKED, so two replicas never claim one task; the writes of a task (Update, UpdateSoon, UpdateLater,
//     UpdateAll, EndAll) change it only while this replica owns it, and a write to a task another
//     replica owns fails with an error wrapping ErrNotOwner.
//   - Dead means dead: Reap ends a dead replica's tasks in one transaction with its lease row, so a
//     task ends once, and a replica that renews after being reaped learns it (Renew answers false) and
//     must stop running tasks.
//   - Every change is told: Watch reports each committed change of any task, by any replica, in commit
//     order per task; after a lost connection it reports Resync, since changes may have been missed.
type Replicated interface {
	Tasks
	// Replica is this process's replica name.
	Replica() string
	// Renew writes this replica's lease, until now plus lease, with free, the tasks it could take now
	// (for the console and Offer). It answers false when the lease had lapsed and another replica
	// reaped this one: the caller must stop taking and running tasks.
	Renew(ctx context.Context, lease time.Duration, free int) (held bool, err error)
	// Reap ends the replicas whose lease lapsed before now: each one's tasks that were running (working,
	// waiting for input) end TASK_STATE_FAILED with RestartMessage, its submitted tasks become
	// unclaimed, and its lease row goes. It returns the ids of the tasks it ended.
	Reap(ctx context.Context, now time.Time) ([]a2a.TaskID, error)
	// Claim makes this replica the owner of up to n unclaimed submitted tasks, oldest first, and
	// returns them.
	Claim(ctx context.Context, n int) ([]*a2a.Task, error)
	// Offer stores a new submitted task unclaimed when the member's live replicas have room for it:
	// fewer unended tasks (unclaimed, or owned by a live replica) than perReplica times the live
	// replicas. It answers false, storing nothing, when they have none.
	Offer(ctx context.Context, t *a2a.Task, perReplica int) (bool, error)
	// RequestCancel asks for task id's cancellation. An unended task of a live replica other than this one
	// is marked (Notice.Cancel reaches its owner, which stops it): owner names it and ended is false. An
	// unclaimed task, or one whose owner's lease lapsed, is ended here, TASK_STATE_CANCELED with text at
	// now: ended is true, and owner names the lapsed replica ("" for an unclaimed task). A task this
	// replica owns, or an ended one, is left as it is (owner names this replica, or is "" for an ended
	// task). The error wraps ErrNotFound when no task id is stored.
	RequestCancel(ctx context.Context, id a2a.TaskID, text string, now time.Time) (owner string, ended bool, err error)
	// Watch calls fn, on one goroutine, for each committed change of a task, until ctx ends; it returns
	// ctx's error. While the database cannot be reached it retries, and reports Resync once it listens
	// again.
	Watch(ctx context.Context, fn func(Notice)) error
	// Release gives up the tasks of ids that this replica owns and has not started (submitted): they
	// become unclaimed, for another replica to Claim. It returns the ids it released. A replica that
	// stops gracefully releases its queue.
	Release(ctx context.Context, ids []a2a.TaskID) ([]a2a.TaskID, error)
	// Replicas lists the member's replicas with a lease row, live or lapsed.
	Replicas(ctx context.Context) ([]ReplicaInfo, error)

	// Forward stores message (an a2a.Message's JSON), a follow-up to task id, for the live replica
	// other than this one that runs the task while it waits for its sender (TASK_STATE_INPUT_REQUIRED):
	// Notice.Input reaches that replica. It returns the input's number, or 0, storing nothing, when the
	// task is not waiting at another live replica.
	Forward(ctx context.Context, id a2a.TaskID, message []byte, now time.Time) (int64, error)
	// TakeInputs takes the inputs forwarded to task id, which this replica runs, that no one took yet,
	// oldest first: each is this replica's to Answer.
	TakeInputs(ctx context.Context, id a2a.TaskID) ([]Input, error)
	// Answer records what became of input n: refusal is "" when the task took it, else why not
	// (NotWaiting when the task no longer waited).
	Answer(ctx context.Context, n int64, refusal string) error
	// Outcome reads input n and its task's state now.
	Outcome(ctx context.Context, n int64) (InputOutcome, error)
}

// Input is one input forwarded to a task (Replicated.Forward).
type Input struct {
	N       int64
	Message json.RawMessage
}

// InputOutcome is what became of a forwarded input so far.
type InputOutcome struct {
	Taken, Answered bool
	Refusal         string        // once answered: "" when the task took the input
	State           a2a.TaskState // the task's state now
}

// NotWaiting is the refusal of an input whose task no longer waited for one when its owner took it.
const NotWaiting = "the task no longer waits for input"

// EventLog is a store that keeps each task's stream events, numbered in order from 1, in the
// transaction of the change they describe (the PostgreSQL store, DESIGN §16): what lets a stream on any
// replica send the task as it stands and then every later event once, also to a client that comes back
// on another replica with the number of the last event it had.
type EventLog interface {
	// Follow reads task id as committed, with the number of its last event, and the events numbered
	// after after up to that number, in one snapshot. The error wraps ErrNotFound when no task id is
	// stored.
	Follow(ctx context.Context, id a2a.TaskID, after int64) (Followed, error)
	// Note appends event (an A2A StreamResponse's JSON) to the events of task id, which this replica
	// runs, after every write of it handed over before: a stream event that changes nothing stored,
	// such as the agent loop's progress. It returns at once; a task this replica does not own gets none.
	Note(id a2a.TaskID, event []byte)
}

// Followed is what Follow read of a task.
type Followed struct {
	Task   json.RawMessage // the task's JSON as committed
	State  a2a.TaskState
	Seq    int64    // the number of its last event (0: none yet)
	Events []Logged // those after the number asked for, in order
}

// Logged is one event of a task's stream as an EventLog keeps it.
type Logged struct {
	Seq   int64
	Event json.RawMessage // an A2A StreamResponse
}

// Notice is one committed change of a task, as Watch reports it.
type Notice struct {
	ID     a2a.TaskID
	Owner  string // the replica that owns the task after the change; "" when unclaimed
	State  a2a.TaskState
	Cancel bool // a cancellation was requested (RequestCancel) and the owner has not ended the task
	// Resync: changes may have been missed (the connection was lost); the other fields are empty.
	Resync bool
	// Input numbers an input forwarded to task ID (Forward), stored or, with Answered, answered; the
	// notice of an input has no Owner nor State.
	Input    int64
	Answered bool
}

// ReplicaInfo is one replica's lease row.
type ReplicaInfo struct {
	Name       string
	Started    time.Time
	LeaseUntil time.Time
	Free       int // the tasks it could take at its last renewal
}

// ErrNotOwner is why a replica's write of a task failed: another replica owns it (or it was reaped
// from this one).
var ErrNotOwner = errNotOwner{}

type errNotOwner struct{}

func (errNotOwner) Error() string {
	return "the task is run by another replica of this member: only its owner writes it"
}

// ReplicaName is the form of a replica's name: letters, digits, '.', '_' and '-', 1 to 63 of them
// (a host name's label, so a container's or a pod's name fits).
var ReplicaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
