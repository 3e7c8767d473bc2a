package store

import (
	"context"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Tasks is what a member needs of its task store, whichever holds the tasks: the embedded SQLite store
// (Store, the default, for one process) or PostgreSQL (package member/store/postgres, DESIGN §16). The
// session core and the door see only this; the behaviour below is one suite (package storetest) run
// against both.
//
// Guarantees every implementation keeps:
//   - Durable on return: Create, Update, UpdateAll, EndAll and Recover return once their change is
//     committed and survives a crash of the process (and, for PostgreSQL, of the machine it runs on).
//     UpdateSoon's change need not be; UpdateLater's is once its wait returns nil.
//   - In order: the writes of one caller are committed in the order they were handed over, UpdateSoon's
//     and UpdateLater's included, so a reader never sees a later state replaced by an earlier one.
//     Settle returns once everything handed over before it is committed.
//   - One "not found": a task the store does not hold, or one outside a request's Scope, is an error
//     wrapping ErrNotFound (and so a2a.ErrTaskNotFound, -32001 on the wire), the same error either way,
//     so a peer cannot tell one from the other (NotStored).
//   - Reads see commits: a Get after a write has returned sees it, and returns a copy the caller may
//     change; GetInScope's bytes are the task's JSON as a2a.Task marshals it, not to be changed.
//     UpdateSoon's change is seen from the moment UpdateSoon returns, before it is committed (Pending):
//     the session tells streams of it then, and a stream opened after must not read the task older.
//   - Pages: ListInScope pages newest first by the order tasks were created; its tokens are opaque,
//     refused (a2a.ErrInvalidParams) for another filter, and stable while tasks are added or ended.
//
// Safe for concurrent use. Close ends the store's background work after writing what it was handed.
type Tasks interface {
	// Create stores a new task; its id must be new to the store.
	Create(ctx context.Context, t *a2a.Task) error
	// CreateBatched takes a task to store in the background without waiting (a rejection in a flood);
	// false when it does not, and the caller Creates it.
	CreateBatched(t *a2a.Task) bool
	// Update replaces the stored task whose id is t's.
	Update(ctx context.Context, t *a2a.Task) error
	// UpdateAll stores every task of ts as Update does, in one transaction, and returns each one's error.
	UpdateAll(ctx context.Context, ts []*a2a.Task) []error
	// UpdateSoon stores t as Update does, soon, and returns without waiting; reads show t at once. A
	// failure is logged.
	UpdateSoon(t *a2a.Task)
	// UpdateLater hands t over as UpdateSoon does and returns what waits until it is durable and
	// reports its error; the wait must be called once.
	UpdateLater(ctx context.Context, t *a2a.Task) (wait func() error)
	// Settle returns once every write handed over before it is committed.
	Settle(ctx context.Context) error
	// Get returns the stored task, a copy the caller may change.
	Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	// GetByMessage returns the newest task the message messageID of caller ("" for the operator)
	// created, rejected ones left out: what a retried SendMessage answers (DESIGN §16, safe retries).
	GetByMessage(ctx context.Context, caller, messageID string) (*a2a.Task, error)
	// GetAll returns the stored tasks of ids, in the order of ids, leaving out those it does not hold.
	GetAll(ctx context.Context, ids []a2a.TaskID) ([]*a2a.Task, error)
	// GetInScope returns a stored task in scope as its JSON.
	GetInScope(ctx context.Context, id a2a.TaskID, sc Scope) ([]byte, error)
	// ListInScope returns one page of the tasks in scope that match q, newest first.
	ListInScope(ctx context.Context, q ListQuery, sc Scope) (ListPage, error)
	// EndAll gives every task of ids the store holds the terminal state with text as its status message
	// and now as its timestamp, at once; the ids it ended, in the order of ids.
	EndAll(ctx context.Context, ids []a2a.TaskID, state a2a.TaskState, text string, now time.Time) ([]a2a.TaskID, error)
	// Recover ends failed, with RestartMessage, every task not in a terminal state: the ids it changed.
	// Call it once, before the store takes new tasks.
	Recover(ctx context.Context, now time.Time) ([]a2a.TaskID, error)
	// Ping reports whether the store can be read.
	Ping(ctx context.Context) error
	// Close stops the background work, after writing what it was handed, and closes the store.
	Close() error
}

var _ Tasks = (*Store)(nil)

// All reports whether the scope sees every task (the operator's).
func (sc Scope) All() bool { return sc.all }

// Caller is the member whose tasks a peer's scope sees; "" for the operator's scope and the zero Scope.
func (sc Scope) Caller() string { return sc.caller }

// Sees reports whether a task sent by caller ("" for the operator) is in the scope.
func (sc Scope) Sees(caller string) bool { return sc.sees(caller) }

// ListAll is ListInScope of t in the operator's scope, every task: one page of the tasks that match q.
func ListAll(t Tasks) func(ctx context.Context, q ListQuery) (ListPage, error) {
	return func(ctx context.Context, q ListQuery) (ListPage, error) {
		return t.ListInScope(ctx, q, OperatorScope())
	}
}

// FirstMessageID is the id of the message that created t (its first history message); "" when it has
// none. GetByMessage finds a task by it.
func FirstMessageID(t *a2a.Task) string {
	if len(t.History) == 0 {
		return ""
	}
	return string(t.History[0].MessageID)
}

// TaskCaller is the member that sent t, from its metadata (murmur.caller); "" for the operator's tasks.
func TaskCaller(t *a2a.Task) string { return taskCaller(t) }

// PageToken is the token of the page after the task numbered seq (its order of creation, which a store
// keeps) for the filter of q.
func PageToken(seq int64, q ListQuery) string { return encodePageToken(seq, q.digest()) }

// PageCursor is the seq a page token of q's filter continues after; an error wrapping
// a2a.ErrInvalidParams for a token this store did not issue or issued for another filter.
func PageCursor(token string, q ListQuery) (int64, error) { return decodePageToken(token, q.digest()) }
