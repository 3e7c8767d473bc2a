package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// The writer. Every write (Create, Update, UpdateAll, UpdateSoon, UpdateLater, EndAll, Recover, and
// Settle's marker) is appended to one queue, under one lock, in the order it is handed over. One
// goroutine takes what the queue holds (maxGroup writes at most) and commits it in one transaction,
// statement after statement in queue order, then answers each write's waiter: concurrent writers share
// a commit (and its WAL flush), and the database sees the writes in the order they were handed over.
//
// A group of plain rows (creates and updates) is one pipelined batch, which PostgreSQL runs as one
// implicit transaction: one round trip. A group holding an EndAll or a Recover, which read before they
// write, is an explicit transaction. A duplicate id or an unknown task fails only its own write (ON
// CONFLICT DO NOTHING, and the count of rows an UPDATE changed); a statement that fails otherwise
// aborts the transaction, and the group is then written again one write per transaction, so that it
// fails alone.

// maxGroup bounds the writes of one group commit, so a transaction stays short.
const maxGroup = 256

type writeKind int

const (
	kindRows    writeKind = iota // creates and updates: Create, Update, UpdateAll, UpdateSoon, UpdateLater
	kindEndAll                   // EndAll
	kindRecover                  // Recover
	kindSettle                   // Settle's marker: no statement
)

// write is one write handed to the writer.
type write struct {
	kind writeKind
	rows []row // kindRows

	// kindEndAll and kindRecover.
	ids   []a2a.TaskID
	state a2a.TaskState
	text  string
	now   time.Time

	done chan result // capacity 1; nil for UpdateSoon's, whose failure is logged
	seq  int64       // the order it was handed over in (Store.handed)
	show bool        // UpdateSoon's: reads show its row from the moment it is handed over (store.Pending)

	// Filled by the transaction that wrote it, and sent on done once that transaction is committed.
	res result
}

// result is a write's outcome: each row's error (kindRows), or the ids it changed and its error.
type result struct {
	errs    []error
	changed []a2a.TaskID
	err     error
}

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
	// endSQL gives the tasks of $3 (with their new JSON in $4) state $1 and status time $2.
	endSQL = `UPDATE tasks AS t SET state = $1, status_ts = $2, task = v.task, version = t.version + 1
		FROM unnest($3::text[], $4::bytea[]) AS v(id, task) WHERE t.id = v.id`
	// endFreedSQL is endSQL that also takes the tasks from their owner: the tasks of a replica ended by
	// another (Reap, RequestCancel) or by its successor (Recover), which a process of the ended
	// replica still running unawares must no longer write (store.ErrNotOwner).
	endFreedSQL = `UPDATE tasks AS t SET state = $1, status_ts = $2, task = v.task, version = t.version + 1, owner = ''
		FROM unnest($3::text[], $4::bytea[]) AS v(id, task) WHERE t.id = v.id`
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

// hand appends w to the queue and wakes the writer; false when the store is closed.
func (s *Store) hand(w *write) bool {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return false
	}
	s.handed++
	w.seq = s.handed
	if w.show {
		r := w.rows[0]
		s.pending.Put(r.id, w.seq, r.caller, r.body)
	} else {
		for _, r := range w.rows {
			if r.body != nil {
				s.pending.Supersede(r.id, w.seq, r.caller, r.body)
			}
		}
	}
	s.queue = append(s.queue, w)
	s.qmu.Unlock()
	s.wake()
	return true
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// await hands w over and waits until the transaction holding it is committed (or has failed). It does
// not give up when ctx ends once w is handed over: w may be committed all the same, and its caller must
// know.
func (s *Store) await(ctx context.Context, w *write) result {
	if err := ctx.Err(); err != nil {
		return result{err: err}
	}
	w.done = make(chan result, 1)
	if !s.hand(w) {
		return result{err: errClosed}
	}
	return <-w.done
}

var errClosed = errors.New("the task store is closed")

// Create stores a new task; its id must be new to the store. It returns once the task is committed.
func (s *Store) Create(ctx context.Context, t *a2a.Task) error {
	r := taskRow(t, true)
	if r.err != nil {
		return r.err
	}
	r.owner = s.replica
	r.trace = conv.Traceparent(ctx)
	r.created = s.now().UnixMilli()
	if ts := t.Status.Timestamp; ts != nil {
		r.created = ts.UnixMilli()
	}
	err := s.rowError(t.ID, s.await(ctx, &write{kind: kindRows, rows: []row{r}}))
	if errors.Is(err, errNotInserted) && s.replica != "" && r.message != "" && t.Status.State != a2a.TaskStateRejected {
		// A clash on the task's message, not its id, when the message's task is stored already.
		if other, gerr := s.GetByMessage(ctx, r.caller, r.message); gerr == nil && other.ID != t.ID {
			return fmt.Errorf("member: storing task %s: %w", t.ID, store.ErrSentBefore)
		}
	}
	return err
}

// errNotInserted is why a create stored nothing: a task with its id, or (a replica's) a task for its
// message, is stored already.
var errNotInserted = errors.New("a task with this id is already stored")

// rowError is the error of a one-row write.
func (s *Store) rowError(id a2a.TaskID, res result) error {
	if res.err != nil {
		return s.fail("storing task "+string(id), retryWrite, res.err)
	}
	return res.errs[0]
}

// CreateBatched hands a new task to the writer and returns at once, without waiting for its commit (a
// rejection in a flood): the writer commits it with the next group, in the order of the other writes;
// until then Get does not find it, and a failure (its id already stored: the stored task is kept) is
// logged. It reports false, and keeps nothing, when batchMaxRows tasks or batchMaxBytes of task JSON
// wait already, when the task has no id or cannot be stored, or when the store is closed: the caller
// then Creates it.
func (s *Store) CreateBatched(t *a2a.Task) bool {
	r := taskRow(t, true)
	if r.err != nil {
		return false
	}
	r.owner = s.replica
	r.created = s.now().UnixMilli()
	if ts := t.Status.Timestamp; ts != nil {
		r.created = ts.UnixMilli()
	}
	r.batched = true
	size := int64(len(r.body))
	if s.batchedRows.Add(1) > batchMaxRows || s.batchedBytes.Add(size) > batchMaxBytes {
		s.batchedRows.Add(-1)
		s.batchedBytes.Add(-size)
		return false
	}
	if !s.hand(&write{kind: kindRows, rows: []row{r}}) {
		s.batchedRows.Add(-1)
		s.batchedBytes.Add(-size)
		return false
	}
	return true
}

// What CreateBatched may hold, handed over and not yet committed: beyond it, the caller Creates.
const (
	batchMaxRows  = 1024
	batchMaxBytes = 8 << 20
)

// Update replaces the stored task whose id is t's with t, once committed. The error wraps
// store.ErrNotFound when the store has no such task, and, in a replica,
// store.ErrNotOwner when another replica owns it, or none does (it was reaped from this one).
func (s *Store) Update(ctx context.Context, t *a2a.Task) error {
	r := taskRow(t, false)
	if r.err != nil {
		if t.ID != "" && !storable(string(t.ID)) {
			return notfound.Task(t.ID)
		}
		return r.err
	}
	return s.rowError(t.ID, s.await(ctx, &write{kind: kindRows, rows: []row{r}}))
}

// UpdateAll stores every task of ts as Update does, all in one transaction, and returns each task's
// error in order.
func (s *Store) UpdateAll(ctx context.Context, ts []*a2a.Task) []error {
	errs := make([]error, len(ts))
	var rows []row
	var at []int
	for i, t := range ts {
		r := taskRow(t, false)
		if r.err != nil {
			errs[i] = r.err
			if t.ID != "" && !storable(string(t.ID)) {
				errs[i] = notfound.Task(t.ID)
			}
			continue
		}
		rows, at = append(rows, r), append(at, i)
	}
	if len(rows) == 0 {
		return errs
	}
	res := s.await(ctx, &write{kind: kindRows, rows: rows})
	for j, i := range at {
		if res.err != nil {
			errs[i] = s.fail("storing task "+string(rows[j].id), retryWrite, res.err)
		} else {
			errs[i] = res.errs[j]
		}
	}
	return errs
}

// UpdateSoon stores t as Update does, with the writer's next group, and returns without waiting: an
// Update or Create handed over after it is committed after it. Reads show t at once (store.Pending). A
// failure is logged.
func (s *Store) UpdateSoon(t *a2a.Task) {
	r := taskRow(t, false)
	if r.err != nil {
		s.log.Error("the task store could not store a task's progress", "task", t.ID, "err", r.err)
		return
	}
	if !s.hand(&write{kind: kindRows, rows: []row{r}, show: true}) {
		s.log.Error("the task store could not store a task's progress", "task", t.ID, "err", errClosed)
	}
}

// Note appends event to the events of task id after the writes handed over before it, with the
// writer's next group, and returns without waiting (store.EventLog). Only a replica keeps notes: a task
// it does not own gets none, and neither does a member of one process, whose streams are its own.
func (s *Store) Note(id a2a.TaskID, event []byte) {
	if s.replica == "" || !storable(string(id)) {
		return
	}
	if !s.hand(&write{kind: kindRows, rows: []row{{id: id, body: event, note: true}}}) {
		s.log.Warn("the task store could not keep a task's progress event", "task", id, "err", errClosed)
	}
}

// UpdateLater hands t over as UpdateSoon does, at once, and returns what waits until t is committed and
// reports its error as Update would. The wait must be called once.
func (s *Store) UpdateLater(ctx context.Context, t *a2a.Task) (wait func() error) {
	if err := ctx.Err(); err != nil {
		return func() error { return fmt.Errorf("member: storing task %s: %w", t.ID, err) }
	}
	r := taskRow(t, false)
	if r.err != nil {
		return func() error { return r.err }
	}
	w := &write{kind: kindRows, rows: []row{r}, done: make(chan result, 1)}
	if !s.hand(w) {
		return func() error { return s.fail("storing task "+string(t.ID), retryWrite, errClosed) }
	}
	return func() error { return s.rowError(t.ID, <-w.done) }
}

// Settle returns once every write handed over before it is committed.
func (s *Store) Settle(ctx context.Context) error {
	if res := s.await(ctx, &write{kind: kindSettle}); res.err != nil {
		return s.fail("settling the task store", retryWrite, res.err)
	}
	return nil
}

// EndAll gives every task of ids that the store holds the terminal status state, with text as its status
// message (a message of its own for each task, as the SQLite store writes it; none when text is "") and
// now as its timestamp, in one transaction: the tasks are read and locked in one statement, given their
// status in Go (the JSON is bytea, which SQL cannot edit in place without changing its bytes) and
// written in one statement. It returns the ids it ended, in the order of ids, once committed; a task the
// store does not hold (or whose stored JSON cannot be decoded) is left out, and an id given twice is
// ended once.
//
// A replica ends only the tasks it owns: another's are left out, as a task not held is.
func (s *Store) EndAll(ctx context.Context, taskIDs []a2a.TaskID, state a2a.TaskState, text string, now time.Time) ([]a2a.TaskID, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	res := s.await(ctx, &write{kind: kindEndAll, ids: taskIDs, state: state, text: text, now: now})
	if res.err != nil {
		return nil, s.fail("ending tasks", retryWrite, res.err)
	}
	return res.changed, nil
}

// Recover ends failed, with store.RestartMessage and a status timestamp of now, every task that was not
// in a terminal state. It returns the ids of the tasks it changed, in creation order, once committed.
// Call it once, before the store takes new tasks.
//
// A replica's Recover touches only its own name's tasks, left by its previous process (dead: this one
// holds the name's lock): those that were running end failed as above, those submitted become
// unclaimed, for any replica to Claim.
func (s *Store) Recover(ctx context.Context, now time.Time) ([]a2a.TaskID, error) {
	if s.replica != "" {
		return s.recoverReplica(ctx, now)
	}
	res := s.await(ctx, &write{kind: kindRecover, state: a2a.TaskStateFailed, text: store.RestartMessage, now: now})
	if res.err != nil {
		return nil, s.fail("recovering tasks", retryWrite, res.err)
	}
	return res.changed, nil
}

// writer runs from Open until Close, and returns once Close began and the queue is empty.
func (s *Store) writer() {
	defer close(s.drained)
	for {
		s.qmu.Lock()
		n := min(len(s.queue), maxGroup)
		group := s.queue[:n:n]
		s.queue = s.queue[n:]
		closed := s.closed
		s.qmu.Unlock()
		if n == 0 {
			if closed {
				return
			}
			<-s.kick
			continue
		}
		s.commitGroup(group)
	}
}

// commitGroup writes group and answers its writes.
func (s *Store) commitGroup(group []*write) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	err := s.writeGroup(ctx, group)
	if err != nil && unreachable(err) {
		// The pool's connections died with the server: new ones from here on.
		s.pool.Reset()
	}
	if err != nil && pgconn.SafeToRetry(err) {
		// Nothing reached the server (a connection of the pool had died with a restart): once more, on
		// a new one.
		err = s.writeGroup(ctx, group)
	}
	var pg *pgconn.PgError
	if err != nil && len(group) > 1 && errors.As(err, &pg) && !unreachable(err) {
		// One statement failed and took the transaction with it: each write alone, so it fails alone.
		for _, w := range group {
			s.commitGroup([]*write{w})
		}
		return
	}
	created := 0
	for _, w := range group {
		if err != nil {
			w.res = result{err: err}
		}
		for i, r := range w.rows {
			if r.create && err == nil && w.res.errs[i] == nil {
				created++
			}
			if r.batched {
				s.batchedRows.Add(-1)
				s.batchedBytes.Add(-int64(len(r.body)))
			}
			s.pending.Settled(r.id, w.seq)
		}
		if w.done != nil {
			w.done <- w.res
			continue
		}
		// UpdateSoon's and CreateBatched's writes: no one waits, so a failure is logged.
		r := w.rows[0]
		err := w.res.err
		if err != nil {
			err = s.fail("storing task "+string(r.id), retryWrite, err)
		} else {
			err = w.res.errs[0]
		}
		switch {
		case err == nil:
		case r.batched:
			s.log.Warn("a task handed to CreateBatched was not stored", "task", r.id, "err", err)
		default:
			s.log.Error("the task store could not store a task's progress", "task", r.id, "err", err)
		}
	}
	s.arrived(created)
}

// writeGroup writes group in one transaction and fills each write's res; the error is the
// transaction's, and then no res counts.
func (s *Store) writeGroup(ctx context.Context, group []*write) error {
	for _, w := range group {
		w.res = result{}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	plain := true
	for _, w := range group {
		plain = plain && (w.kind == kindRows || w.kind == kindSettle)
	}
	if plain {
		// One batch is one implicit transaction, committed at its end: one round trip.
		return sendRows(ctx, conn.Conn(), group, s.replica)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for i := 0; i < len(group); {
		j := i
		for j < len(group) && (group[j].kind == kindRows || group[j].kind == kindSettle) {
			j++
		}
		if j > i {
			if err := sendRows(ctx, tx, group[i:j], s.replica); err != nil {
				return err
			}
			i = j
			continue
		}
		if err := s.end(ctx, tx, group[i]); err != nil {
			return err
		}
		i++
	}
	return tx.Commit(ctx)
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

// end runs an EndAll or a Recover in tx: it reads and locks the tasks, gives each its new status, and
// writes them in one statement.
func (s *Store) end(ctx context.Context, tx pgx.Tx, w *write) error {
	var rows pgx.Rows
	var err error
	if w.kind == kindRecover {
		rows, err = tx.Query(ctx, `SELECT id, task FROM tasks WHERE state = ANY($1) ORDER BY seq FOR UPDATE`,
			[]string{string(a2a.TaskStateSubmitted), string(a2a.TaskStateWorking),
				string(a2a.TaskStateInputRequired), string(a2a.TaskStateAuthRequired)})
	} else {
		list := make([]string, 0, len(w.ids))
		for _, id := range w.ids {
			if storable(string(id)) {
				list = append(list, string(id))
			}
		}
		if s.replica == "" {
			rows, err = tx.Query(ctx, `SELECT id, task FROM tasks WHERE id = ANY($1) FOR UPDATE`, list)
		} else {
			// A replica ends only the tasks it owns; another's are left out, as tasks not held are.
			rows, err = tx.Query(ctx, `SELECT id, task FROM tasks WHERE id = ANY($1) AND owner = $2 FOR UPDATE`, list, s.replica)
		}
	}
	if err != nil {
		return err
	}
	held := map[a2a.TaskID]*a2a.Task{}
	var order []a2a.TaskID // Recover's: creation order
	var decodeErrs []error
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			return err
		}
		t, err := store.Decode(a2a.TaskID(id), body)
		if err != nil {
			decodeErrs = append(decodeErrs, err)
			continue
		}
		held[a2a.TaskID(id)] = t
		order = append(order, a2a.TaskID(id))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if w.kind == kindRecover && len(decodeErrs) > 0 {
		// A task Recover cannot read would stay running forever: refuse rather than skip it.
		w.res.err = errors.Join(decodeErrs...)
		return nil
	}
	if w.kind == kindEndAll {
		order = order[:0]
		placed := make(map[a2a.TaskID]bool, len(held))
		for _, id := range w.ids {
			if _, ok := held[id]; ok && !placed[id] {
				placed[id] = true
				order = append(order, id)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	ts := make([]*a2a.Task, len(order))
	for i, id := range order {
		ts[i] = held[id]
	}
	taskIDs, bodies, err := endedBodies(ts, w.state, w.text, w.now)
	if err != nil {
		w.res.err = err
		return nil
	}
	if _, err := tx.Exec(ctx, endSQL, string(w.state), w.now.UnixMilli(), taskIDs, bodies); err != nil {
		return err
	}
	w.res.changed = order
	return nil
}

// endedBodies gives each task of ts (changing it) the terminal status state, with text as its status
// message (a message of its own for each task; none when text is "") and now as its timestamp, and
// returns their ids and JSON for endSQL or endFreedSQL. EndAll, Recover, Reap and RequestCancel all end
// tasks through it.
func endedBodies(ts []*a2a.Task, state a2a.TaskState, text string, now time.Time) (taskIDs []string, bodies [][]byte, err error) {
	stamp := a2a.NewTimestamp(now)
	taskIDs = make([]string, len(ts))
	bodies = make([][]byte, len(ts))
	for i, t := range ts {
		t.Status = a2a.TaskStatus{State: state, Timestamp: stamp}
		if text != "" {
			t.Status.Message = statusMessage(t, text)
		}
		body, err := json.Marshal(t)
		if err != nil {
			return nil, nil, fmt.Errorf("storing task %s: %w", t.ID, err)
		}
		taskIDs[i], bodies[i] = string(t.ID), body
	}
	return taskIDs, bodies, nil
}

// statusMessage is the agent's message of an ended task's status, as the SQLite store writes it.
func statusMessage(t *a2a.Task, text string) *a2a.Message {
	return &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
		Role:      a2a.RoleAgent,
		Parts:     []a2a.Part{a2a.TextPart(text)},
		TaskID:    t.ID,
		ContextID: t.ContextID,
	}
}
