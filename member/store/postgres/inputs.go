package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// Forward stores message for the live replica other than this one that runs task id while it waits for
// input; 0 when there is none (store.Replicated).
func (s *Store) Forward(ctx context.Context, id a2a.TaskID, message []byte, now time.Time) (int64, error) {
	if !storable(string(id)) {
		return 0, nil
	}
	var n int64
	err := s.pool.QueryRow(ctx, `INSERT INTO task_inputs (task_id, message)
		SELECT t.id, $2 FROM tasks t WHERE t.id = $1 AND t.state = $3 AND t.owner <> '' AND t.owner <> $4
			AND EXISTS (SELECT FROM replicas r WHERE r.name = t.owner AND r.lease_until >= $5)
		RETURNING n`, string(id), message, string(a2a.TaskStateInputRequired), s.replica, now.UnixMilli()).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("forwarding a message to task "+string(id), retryWrite, err)
	}
	return n, nil
}

// TakeInputs takes the untaken inputs of task id, which this replica owns, oldest first.
func (s *Store) TakeInputs(ctx context.Context, id a2a.TaskID) ([]store.Input, error) {
	if !storable(string(id)) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE task_inputs SET taken = true WHERE n IN (
			SELECT i.n FROM task_inputs i JOIN tasks t ON t.id = i.task_id
			WHERE i.task_id = $1 AND NOT i.taken AND t.owner = $2 FOR UPDATE OF i SKIP LOCKED)
		RETURNING n, message`, string(id), s.replica)
	if err != nil {
		return nil, s.fail("taking the inputs of task "+string(id), retryWrite, err)
	}
	in, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Input, error) {
		var v store.Input
		return v, r.Scan(&v.N, &v.Message)
	})
	if err != nil {
		return nil, s.fail("taking the inputs of task "+string(id), retryWrite, err)
	}
	// RETURNING follows no order: oldest first, as they were forwarded.
	slices.SortFunc(in, func(a, b store.Input) int { return cmp.Compare(a.N, b.N) })
	return in, nil
}

// Answer records what became of input n.
func (s *Store) Answer(ctx context.Context, n int64, refusal string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE task_inputs SET taken = true, answered = true, refusal = $2 WHERE n = $1`, n, refusal); err != nil {
		return s.fail("answering an input", retryWrite, err)
	}
	return nil
}

// Outcome reads input n and its task's state.
func (s *Store) Outcome(ctx context.Context, n int64) (store.InputOutcome, error) {
	var o store.InputOutcome
	var state string
	err := s.pool.QueryRow(ctx, `SELECT i.taken, i.answered, i.refusal, t.state FROM task_inputs i JOIN tasks t ON t.id = i.task_id WHERE i.n = $1`, n).
		Scan(&o.Taken, &o.Answered, &o.Refusal, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, notfound.Task("")
	}
	if err != nil {
		return o, s.fail("reading a forwarded input", retryRead, err)
	}
	o.State = a2a.TaskState(state)
	return o, nil
}

// Release makes the submitted tasks of ids that this replica owns unclaimed (store.Replicated). The
// writes handed over before it are committed first, so that none of them lands after the release.
func (s *Store) Release(ctx context.Context, ids []a2a.TaskID) ([]a2a.TaskID, error) {
	if s.replica == "" || len(ids) == 0 {
		return nil, nil
	}
	if err := s.Settle(ctx); err != nil {
		return nil, err
	}
	list := make([]string, 0, len(ids))
	for _, id := range ids {
		if storable(string(id)) {
			list = append(list, string(id))
		}
	}
	rows, err := s.pool.Query(ctx, `UPDATE tasks SET owner = '', version = version + 1
		WHERE id = ANY($1) AND owner = $2 AND state = $3 RETURNING id`, list, s.replica, string(a2a.TaskStateSubmitted))
	if err != nil {
		return nil, s.fail("releasing this replica's queued tasks", retryWrite, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.fail("releasing this replica's queued tasks", retryWrite, err)
	}
	out := make([]a2a.TaskID, len(got))
	for i, id := range got {
		out[i] = a2a.TaskID(id)
	}
	return out, nil
}
