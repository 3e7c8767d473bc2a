package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// row is one task row to create or update.
type row struct {
	create  bool
	id      a2a.TaskID
	context string
	state   string
	ts      *int64 // status timestamp, unix ms; nil when none
	created int64  // unix ms
	caller  string
	message string // a create's: the id of the message that created the task (store.FirstMessageID)
	body    []byte
	err     error  // the row cannot be written (set before it is handed over)
	batched bool   // CreateBatched's
	owner   string // a create's: the replica that runs the task ('' unclaimed)
	note    bool   // Note's: body is a stream event to append to the task's events
	// trace is a create's: the W3C traceparent of the request that sent the task (conv.Traceparent),
	// which its run continues at whichever replica claims it; '' when it carried none.
	trace string
}

const (
	// insertSQL's $9 is the task's owner: '' in a member of one process, and for a task Offer stores;
	// $10 its traceparent.
	insertSQL = `INSERT INTO tasks (id, context_id, state, status_ts, created, caller, version, task, message_id, owner, traceparent)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`
	// A replica's insertSQL (DESIGN §16, safe retries): the task is stored only when no other task of
	// the same caller's message is (a rejection aside), under messageLockSQL, taken by the statement
	// before it in the same transaction, so that two replicas storing copies of one message at once
	// store one task: the second one's statement starts once the first's transaction has ended, and sees
	// its task. A member of one process holds its copies in memory (member/retry).
	insertOnceSQL = `INSERT INTO tasks (id, context_id, state, status_ts, created, caller, version, task, message_id, owner, traceparent)
		SELECT $1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10
		WHERE $8 = '' OR $3 = 'TASK_STATE_REJECTED' OR NOT EXISTS (SELECT FROM tasks
			WHERE caller = $6 AND message_id = $8 AND message_id <> '' AND state <> 'TASK_STATE_REJECTED')
		ON CONFLICT (id) DO NOTHING`
	messageLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || ' ' || $2, 0))`
	// A task's context and caller never change once it is created.
	updateSQL = `UPDATE tasks SET state = $2, status_ts = $3, task = $4, version = version + 1 WHERE id = $1`
	// updateOwnedSQL is a replica's updateSQL: it writes the task only while replica $5 owns it, and
	// answers whether it did and the task's owner (NULL when no such task is stored), so that a task
	// another replica owns is told from one not stored (notOwned, store.ErrNotFound).
	updateOwnedSQL = `WITH u AS (UPDATE tasks SET state = $2, status_ts = $3, task = $4, version = version + 1
			WHERE id = $1 AND owner = $5 RETURNING 1)
		SELECT EXISTS (SELECT FROM u), (SELECT owner FROM tasks WHERE id = $1)`
	// noteSQL appends event $2 to the events of task $1 while replica $3 owns it; the UPDATE leaves the
	// task's JSON as it is, so the events trigger writes nothing more, and the notify trigger wakes the
	// streams of every replica.
	// A note of an ended task is dropped: the terminal statusUpdate stays the last event.
	noteSQL = `WITH n AS (UPDATE tasks SET event_seq = event_seq + 1 WHERE id = $1 AND owner = $3
			AND state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')
			RETURNING event_seq)
		INSERT INTO task_events (task_id, seq, event) SELECT $1, event_seq, $2 FROM n`
)

// statusMillis is t's status timestamp in unix milliseconds, or nil when it has none.
func statusMillis(t *a2a.Task) *int64 {
	if t.Status.Timestamp == nil {
		return nil
	}
	ms := t.Status.Timestamp.UnixMilli()
	return &ms
}

// taskRow is the row that stores t.
func taskRow(t *a2a.Task, create bool) row {
	r := row{create: create, id: t.ID, context: t.ContextID, state: string(t.Status.State), ts: statusMillis(t),
		caller: store.TaskCaller(t)}
	if create {
		r.message = store.FirstMessageID(t)
	}
	switch {
	case t.ID == "":
		r.err = errors.New("member: storing a task without an id")
		return r
	case !storable(string(t.ID)):
		r.err = fmt.Errorf("member: storing task %q: its id is not valid UTF-8 text", t.ID)
		return r
	case !storable(t.ContextID) || !storable(r.caller) || !storable(r.state) || !storable(r.message):
		r.err = fmt.Errorf("member: storing task %s: its context id, caller or state is not valid UTF-8 text", t.ID)
		return r
	}
	body, err := json.Marshal(t)
	if err != nil {
		r.err = fmt.Errorf("member: storing task %s: %w", t.ID, err)
		return r
	}
	r.body = body
	return r
}

// batcher is what sendRows sends through: a connection (one implicit transaction) or a transaction.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// sendRows writes the rows of group as one batch and fills each write's errors.
func sendRows(ctx context.Context, db batcher, group []*write, replica string) error {
	b := &pgx.Batch{}
	for _, w := range group {
		for _, r := range w.rows {
			switch {
			case r.note:
				b.Queue(noteSQL, string(r.id), r.body, replica)
			case r.create && replica != "" && r.message != "":
				b.Queue(messageLockSQL, r.caller, r.message)
				b.Queue(insertOnceSQL, string(r.id), r.context, r.state, r.ts, r.created, r.caller, r.body, r.message, r.owner, r.trace)
			case r.create:
				b.Queue(insertSQL, string(r.id), r.context, r.state, r.ts, r.created, r.caller, r.body, r.message, r.owner, r.trace)
			case replica != "":
				b.Queue(updateOwnedSQL, string(r.id), r.state, r.ts, r.body, replica)
			default:
				b.Queue(updateSQL, string(r.id), r.state, r.ts, r.body)
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	br := db.SendBatch(ctx, b)
	for _, w := range group {
		w.res.errs = make([]error, len(w.rows))
		for i, r := range w.rows {
			if !r.create && !r.note && replica != "" {
				var written bool
				var owner *string
				if err := br.QueryRow().Scan(&written, &owner); err != nil {
					_ = br.Close() // already failing: the error returned says what went wrong
					return err
				}
				switch {
				case written:
				case owner == nil:
					w.res.errs[i] = notfound.Task(r.id)
				default:
					w.res.errs[i] = notOwned(r.id, replica, *owner)
				}
				continue
			}
			if r.create && replica != "" && r.message != "" {
				if _, err := br.Exec(); err != nil { // messageLockSQL
					_ = br.Close() // already failing: the error returned says what went wrong
					return err
				}
			}
			tag, err := br.Exec()
			if err != nil {
				_ = br.Close() // already failing: the error returned says what went wrong
				return err
			}
			if tag.RowsAffected() == 0 && !r.note { // a note of a task no longer owned is dropped
				if r.create {
					w.res.errs[i] = fmt.Errorf("member: storing task %s: %w", r.id, errNotInserted)
				} else {
					w.res.errs[i] = notfound.Task(r.id)
				}
			}
		}
	}
	// The implicit transaction commits here, when the batch's end is read.
	return br.Close()
}
