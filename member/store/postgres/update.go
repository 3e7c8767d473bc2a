package postgres

import (
	"context"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// rowError is the error of a one-row write.
func (s *Store) rowError(id a2a.TaskID, res result) error {
	if res.err != nil {
		return s.fail("storing task "+string(id), retryWrite, res.err)
	}
	return res.errs[0]
}

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
