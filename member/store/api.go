package store

import (
	"context"
	"errors"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// The errors of a task store, matched with errors.Is, never by their text.
var (
	// ErrNotFound is the one "not found" of a task store: a task it does not hold, or holds outside a
	// request's Scope. It wraps a2a.ErrTaskNotFound, so the door answers -32001 (TaskNotFoundError)
	// without a table of its own; the error a store returns also carries the task's id for the wire.
	ErrNotFound = notfound.Err
	// ErrSentBefore is why Create refused a task: the same caller's message with the same messageId
	// made a task already, stored by another replica of the member at the same moment (DESIGN §16,
	// safe retries). GetByMessage finds that task, which is the answer to the message.
	ErrSentBefore = errors.New("member: a task for this message is already stored (a copy of it reached another replica first)")
)

// Tasks is what a member needs of its task store, whichever holds the tasks: the embedded SQLite store
// (Store, the default, for one process) or PostgreSQL (package member/store/postgres, DESIGN §16). The
// session core and the door see only this; the guarantees below are one suite (package storetest) run
// against both.
//
// Guarantees every implementation keeps:
//   - Durable on return: Create, Update, UpdateAll, EndAll and Recover return once their change is
//     committed and survives a crash of the process (and, for PostgreSQL, of the machine it runs on).
//   - Three ways to write a task, which differ in when the change is seen and when it is safe, not in
//     what is stored: Update waits, and the change is durable and seen when it returns; UpdateLater
//     hands the change over at once, in order, and it is durable and seen when its wait returns (a
//     task's end, by a caller that must not hold its lock across the disk); UpdateSoon hands it over
//     at once and it is seen at once, before it is durable, which it need not ever be (a task starting
//     to work: a crash before its commit leaves the task submitted, which Recover ends failed all the
//     same).
//   - In order: the writes of one caller are committed in the order they were handed over, UpdateSoon's
//     and UpdateLater's included, so a reader never sees a later state replaced by an earlier one.
//     Settle returns once everything handed over before it is committed (CreateBatched's tasks aside).
//   - One "not found": every method that names a task answers a task the store does not hold, or one
//     outside the request's Scope, with an error wrapping ErrNotFound, the same text and the same wire
//     error either way but for the id, so a peer cannot tell one from the other.
//   - Reads see writes: a read after a write has returned (or after UpdateSoon has) sees it. Get and
//     GetAll return copies the caller may change; GetInScope's bytes are the task's JSON as a2a.Task
//     marshals it, not to be changed. The session tells streams of an UpdateSoon's change when it hands
//     it over, so a stream opened after must not read the task older (Pending).
//   - Pages: ListInScope pages newest first by the order tasks were created; its tokens are opaque,
//     refused with an error wrapping a2a.ErrInvalidParams for another filter, and stable while tasks
//     are added or ended.
//
// Safe for concurrent use. Close ends the store's background work after writing what it was handed.
type Tasks interface {
	// Create stores a new task, durable on return. It refuses a task without an id or with an id
	// already stored, storing nothing, and (a replica) one whose message is stored already with an
	// error wrapping ErrSentBefore.
	Create(ctx context.Context, t *a2a.Task) error
	// CreateBatched takes a task to store in the background without waiting (a rejection in a flood):
	// it need not be durable, ListInScope shows it once committed, and Settle need not wait for it. It
	// answers false, keeping nothing, when its buffer is full, the task has no id or the store is
	// closed; the caller then Creates it.
	CreateBatched(t *a2a.Task) bool
	// Update replaces the stored task whose id is t's, durable and seen on return. The error wraps
	// ErrNotFound when the store does not hold the task.
	Update(ctx context.Context, t *a2a.Task) error
	// UpdateAll stores every task of ts as Update does, in one transaction, and returns each one's
	// error in the order of ts: a task the store does not hold fails alone, with ErrNotFound.
	UpdateAll(ctx context.Context, ts []*a2a.Task) []error
	// UpdateSoon hands t over to be stored as Update does and returns without waiting: reads show t at
	// once, and it is durable some time later. A failure (ErrNotFound included) is logged, not
	// returned.
	UpdateSoon(t *a2a.Task)
	// UpdateLater hands t over at once, in order with the other writes, and returns what waits until t
	// is durable and seen and reports Update's error (ErrNotFound included). The wait must be called
	// once.
	UpdateLater(ctx context.Context, t *a2a.Task) (wait func() error)
	// Settle returns once every write handed over before it is committed.
	Settle(ctx context.Context) error
	// Get returns the stored task, a copy the caller may change. The error wraps ErrNotFound when the
	// store does not hold it.
	Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	// GetByMessage returns the newest task the message messageID of caller ("" for the operator)
	// created, rejected ones left out: what a retried SendMessage answers (DESIGN §16, safe retries).
	// The error wraps ErrNotFound when there is none.
	GetByMessage(ctx context.Context, caller, messageID string) (*a2a.Task, error)
	// GetAll returns the stored tasks of ids, in the order of ids, leaving out those it does not hold
	// (no ErrNotFound). A task that cannot be decoded is left out and its error returned.
	GetAll(ctx context.Context, ids []a2a.TaskID) ([]*a2a.Task, error)
	// GetInScope returns a stored task in scope as its JSON. The error wraps ErrNotFound when the store
	// does not hold it or holds it outside sc.
	GetInScope(ctx context.Context, id a2a.TaskID, sc Scope) ([]byte, error)
	// ListInScope returns one page of the tasks in scope that match q, newest first. A page token not
	// issued for q's filter is refused with an error wrapping a2a.ErrInvalidParams.
	ListInScope(ctx context.Context, q ListQuery, sc Scope) (ListPage, error)
	// EndAll gives every task of ids the store holds the terminal state with text as its status message
	// and now as its timestamp, in one transaction, durable on return; the ids it ended, in the order
	// of ids. A task it does not hold is left out (no ErrNotFound).
	EndAll(ctx context.Context, ids []a2a.TaskID, state a2a.TaskState, text string, now time.Time) ([]a2a.TaskID, error)
	// Recover ends failed, with RestartMessage, every task not in a terminal state, durable on return:
	// the ids it changed, in creation order. Call it once, before the store takes new tasks.
	Recover(ctx context.Context, now time.Time) ([]a2a.TaskID, error)
	// Ping reports whether the store can be read.
	Ping(ctx context.Context) error
	// Close stops the background work, after writing what it was handed, and closes the store. Methods
	// called after Close fail.
	Close() error
}

var _ Tasks = (*Store)(nil)

// ListAll is ListInScope of t in the operator's scope, every task: one page of the tasks that match q.
func ListAll(t Tasks) func(ctx context.Context, q ListQuery) (ListPage, error) {
	return func(ctx context.Context, q ListQuery) (ListPage, error) {
		return t.ListInScope(ctx, q, OperatorScope())
	}
}
