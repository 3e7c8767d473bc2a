package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/store"
)

// Create stores a new task; its id must be new to the store. It returns once the task is committed.
func (s *Store) Create(ctx context.Context, t *a2a.Task) error {
	r := s.createRow(ctx, t)
	if r.err != nil {
		return r.err
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
	s.messages.Add(r.caller, r.message) // before the writer can commit it
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

// CreateLater stores a new task as Create does, handed to the writer at once, and returns what waits
// until it is committed and reports Create's error: reads show the task from the moment it is handed
// over (store.Pending), so whoever runs it may start before its creation is committed, while its
// sender is answered only after. The writes of the task that follow are committed after it, in order.
// Not for a replica, whose Create decides which replica took the message. The wait must be called once.
func (s *Store) CreateLater(ctx context.Context, t *a2a.Task) (wait func() error) {
	if err := ctx.Err(); err != nil {
		return func() error { return fmt.Errorf("member: storing task %s: %w", t.ID, err) }
	}
	r := s.createRow(ctx, t)
	if r.err != nil {
		return func() error { return r.err }
	}
	w := &write{kind: kindRows, rows: []row{r}, show: true, done: make(chan result, 1)}
	if !s.hand(w) {
		return func() error { return s.fail("storing task "+string(t.ID), retryWrite, errClosed) }
	}
	return func() error { return s.rowError(t.ID, <-w.done) }
}

// createRow is the row that creates t, its message added to the filter: GetByMessage must never miss
// it once the row can be committed.
func (s *Store) createRow(ctx context.Context, t *a2a.Task) row {
	r := taskRow(t, true)
	if r.err != nil {
		return r
	}
	r.owner = s.replica
	r.trace = conv.Traceparent(ctx)
	r.created = s.now().UnixMilli()
	if ts := t.Status.Timestamp; ts != nil {
		r.created = ts.UnixMilli()
	}
	s.messages.Add(r.caller, r.message)
	return r
}
