package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Background writes (batched rejections, retention's removals) give way to the writes admitted tasks
// wait for. SQLite has one writer, and a background transaction holding it is slow exactly when a
// flood keeps the CPU busy, so a background chunk starts only once no foreground write has waited or
// run for backgroundQuiet, or once it has waited backgroundMaxWait for such a moment. A chunk is small
// (batchChunk rows), so an admitted task's write that comes meanwhile waits behind one chunk at most.
//
// What arrives beyond batchMaxRows (or batchMaxBytes of task JSON: a rejection holds its whole message)
// while rejections wait for their turn is answered but not kept.
const (
	backgroundQuiet   = 50 * time.Millisecond
	backgroundMaxWait = 2 * time.Second
	backgroundPoll    = 10 * time.Millisecond
	batchChunk        = 128
	BatchMaxRows      = 1024
	batchMaxBytes     = 8 << 20
)

// foreground tracks the store's writes that someone waits for: Create, Update, Recover.
type foreground struct {
	active atomic.Int32 // waiting for the write lock or holding it
	last   atomic.Int64 // when the last one ended, in Unix nanoseconds
}

func (f *foreground) begin() { f.active.Add(1) }

func (f *foreground) end() {
	f.last.Store(time.Now().UnixNano())
	f.active.Add(-1)
}

// quiet reports whether no foreground write runs or waits, nor ended within backgroundQuiet.
func (f *foreground) quiet() bool {
	return f.active.Load() == 0 && time.Since(time.Unix(0, f.last.Load())) >= backgroundQuiet
}

// awaitQuiet waits until the foreground is quiet, or backgroundMaxWait has passed. It reports false
// when ctx ended first.
func (s *Store) awaitQuiet(ctx context.Context) bool {
	deadline := time.Now().Add(backgroundMaxWait)
	for !s.fg.quiet() && time.Now().Before(deadline) {
		t := time.NewTimer(backgroundPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return ctx.Err() == nil
}

// batcher holds the tasks handed to CreateBatched until the batch writer commits them.
type batcher struct {
	mu      sync.Mutex
	rows    []batchRow                 // waiting for the writer, oldest first
	pending map[a2a.TaskID]pendingTask // waiting or being written: getJSON answers from here meanwhile
	bytes   int                        // the JSON held in pending
	dropped int                        // refused because the buffer was full, since the writer last said so
	closed  bool
	wake    chan struct{} // capacity 1: there is something to write
}

type batchRow struct {
	t       *a2a.Task
	body    []byte
	created time.Time
}

func newBatcher() batcher {
	return batcher{pending: map[a2a.TaskID]pendingTask{}, wake: make(chan struct{}, 1)}
}

// CreateBatched hands a new task to the store's batch writer and returns at once, without waiting for
// the disk or the write lock: the writer commits it later with others, in one transaction without an
// fsync of its own, when admitted tasks' writes leave it a moment (within about backgroundMaxWait).
// Until then Get answers it from memory and ListInScope does not show it; a crash before then
// loses it. It is for tasks whose loss costs nothing, such as rejections: a task whose acknowledgement
// promises it survives a crash goes through Create. It reports false, and keeps nothing, when the
// buffer is full or the store is closed.
func (s *Store) CreateBatched(t *a2a.Task) bool {
	if t.ID == "" {
		return false
	}
	body, err := json.Marshal(t)
	if err != nil {
		return false
	}
	created := s.now()
	if ts := t.Status.Timestamp; ts != nil {
		created = ts.Time
	}
	b := &s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.rows) >= BatchMaxRows || b.bytes+len(body) > batchMaxBytes {
		b.dropped++
		return false
	}
	if _, dup := b.pending[t.ID]; dup {
		return false
	}
	// A copy: the caller may change t (the door trims its history) while the writer reads it.
	own := *t
	s.batched.Store(true)
	s.messages.Add(taskCaller(t), FirstMessageID(t)) // before the writer can commit it
	b.rows = append(b.rows, batchRow{t: &own, body: body, created: created})
	b.pending[t.ID] = pendingTask{body: body, caller: taskCaller(t)}
	b.bytes += len(body)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// pendingTask is a task the batch writer holds: its JSON and the member that sent it.
type pendingTask struct {
	body   []byte
	caller string
}

func (b *batcher) get(id a2a.TaskID) (pendingTask, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.pending[id]
	return p, ok
}

func (b *batcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.rows)
}

// close makes CreateBatched refuse from now on; what it took is still written.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

// writeBatches is the batch writer: it runs from OpenWith until Close ends ctx, and writes what is
// left before it returns.
func (s *Store) writeBatches(ctx context.Context) {
	for {
		select {
		case <-s.batch.wake:
		case <-ctx.Done():
			for s.writeChunk() > 0 {
			}
			s.reportDropped()
			return
		}
		for s.batch.waiting() > 0 && s.awaitQuiet(ctx) {
			s.writeChunk()
		}
		s.reportDropped()
	}
}

// writeChunk writes up to batchChunk waiting tasks in one transaction and returns how many it wrote. It
// takes them once the write lock is held, so that what arrived while another write held the lock goes
// into this chunk.
func (s *Store) writeChunk() int {
	b := &s.batch
	s.wmu.Lock()
	b.mu.Lock()
	n := min(len(b.rows), batchChunk)
	chunk := slices.Clone(b.rows[:n])
	b.rows = slices.Delete(b.rows, 0, n)
	b.mu.Unlock()
	var err error
	if n > 0 {
		err = s.unsynced(context.Background(), func(tx *sql.Tx) error {
			s.insertChunk(tx, chunk)
			return nil
		})
		s.arrived(n)
	}
	s.wmu.Unlock()

	b.mu.Lock()
	for _, r := range chunk {
		delete(b.pending, r.t.ID)
		b.bytes -= len(r.body)
	}
	b.mu.Unlock()
	if err != nil {
		s.log.Error("the task store could not write a batch of tasks; they are lost", "tasks", n, "err", err)
	}
	return n
}

// reportDropped logs, once per burst, how many tasks the full buffer refused.
func (s *Store) reportDropped() {
	b := &s.batch
	b.mu.Lock()
	dropped := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("rejected tasks answered but not kept: the batch writer's buffer was full", "tasks", dropped)
	}
}

// insertChunk inserts rows in tx. A row that fails (its id already stored) is left out, and the others
// kept. wmu is held.
func (s *Store) insertChunk(tx *sql.Tx, rows []batchRow) {
	var errs []error
	for _, r := range rows {
		if err := insertTask(context.Background(), tx, r.t, r.body, r.created); err != nil {
			errs = append(errs, err)
		}
	}
	s.hook("batch", len(rows))
	if len(errs) > 0 {
		s.log.Error("tasks left out of a batch", "tasks", len(errs), "err", errors.Join(errs...))
	}
}

// unsynced runs fn in one write transaction committed with synchronous=NORMAL: the commit does not
// wait for an fsync, and the transaction is on disk with the next synced commit or checkpoint (a
// crash before then loses it, and nothing else). It is for writes whose loss costs nothing: batched
// rejections, retention's removals. wmu is held.
func (s *Store) unsynced(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); rerr != nil {
			// A connection left without fsyncs must never store an acknowledged task: drop it, and the
			// pool opens a new one with the pragmas of the DSN.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // returns ErrBadConn, as it is meant to
			err = errors.Join(err, fmt.Errorf("member: task store: restoring synchronous=FULL: %w", rerr))
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	return nil
}
