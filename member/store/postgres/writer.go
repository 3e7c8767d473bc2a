package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/murmur-run/murmur/a2a"
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
//
// The writes are handed over in create.go, update.go and end.go; rows.go holds the statements of the
// rows and their batch, end.go those of EndAll and Recover.

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
	s.cacheMu.Lock()
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
		s.cacheMu.Unlock()
		for _, w := range group {
			s.commitGroup([]*write{w})
		}
		return
	}
	s.cacheWrites(group, err)
	s.cacheMu.Unlock()
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

// cacheWrites brings the cache of a member of one process (Store.cache) up to date with group, whose
// transaction ended with err, before any of its writes is answered or leaves s.pending: a read after a
// write's answer, or after its row left s.pending, finds the task as that write left it. A row that
// changed nothing (an unknown task, a duplicate id) or whose outcome is unknown (err: the commit may have
// happened) is dropped, so that its next read is the database's. CreateBatched's tasks (rejections in a
// flood) are not kept, as the SQLite store keeps them not, so that they do not push out the tasks that
// are read; nor are EndAll's and Recover's, which are dropped instead.
func (s *Store) cacheWrites(group []*write, err error) {
	if s.cache == nil {
		return
	}
	for _, w := range group {
		switch w.kind {
		case kindRows:
			for i, r := range w.rows {
				switch {
				case r.note:
				case err != nil || w.res.errs[i] != nil:
					s.cache.Remove(r.id)
				case !r.batched:
					s.cache.Put(r.id, r.caller, r.body)
				}
			}
		case kindEndAll:
			ids := w.res.changed
			if err != nil || w.res.err != nil {
				ids = w.ids
			}
			for _, id := range ids {
				s.cache.Remove(id)
			}
		case kindRecover:
			if err != nil || w.res.err != nil {
				s.cache.Clear()
			}
			for _, id := range w.res.changed {
				s.cache.Remove(id)
			}
		}
	}
}
