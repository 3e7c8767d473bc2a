package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
)

// The sweeper runs every sweepEvery, and sooner once sweepAfter tasks were created since its last run,
// so that a flood cannot grow the store far beyond max_tasks between two runs. It removes sweepChunk
// tasks per transaction, committed without waiting for the WAL flush (a removal lost in a crash is made
// again by the next sweep), so that no transaction holds many rows' locks for long.
const (
	sweepEvery = time.Minute
	sweepChunk = 256
)

// terminalStates are the states of tasks that have ended: the only ones retention removes.
var terminalStates = []string{
	string(a2a.TaskStateCompleted), string(a2a.TaskStateFailed),
	string(a2a.TaskStateCanceled), string(a2a.TaskStateRejected),
}

// sweepAfter is how many arrivals wake the sweeper early: a tenth of max_tasks, at least 100.
func (s *Store) sweepAfter() int64 { return max(int64(s.retention.MaxTasks/10), 100) }

// arrived counts n new tasks and wakes the sweeper when enough have arrived since its last run.
func (s *Store) arrived(n int) {
	if n > 0 && s.arrivals.Add(int64(n)) >= s.sweepAfter() {
		select {
		case s.sweepKick <- struct{}{}:
		default:
		}
	}
}

// sweepLoop is the retention sweeper: it runs from Open until Close ends ctx.
func (s *Store) sweepLoop(ctx context.Context) {
	ticker := time.NewTicker(sweepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-s.sweepKick:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("removing old tasks from the task store", "err", err)
		}
		if _, err := s.sweepFiles(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("removing expired peer files from the task store", "err", err)
		}
	}
}

// Sweep removes the ended tasks the store's retention no longer keeps, by the SQLite store's rules:
// every one whose last status is older than MaxAge (by the store's clock; a task without a status time
// by its creation time), then, while more than MaxTasks ended tasks remain, the oldest of them, rejected
// tasks first. Tasks that are submitted, working or waiting for input are never removed. Config.Removed
// is told each chunk's ids once its removal is committed. It returns how many tasks it removed. The
// background sweeper calls it; so may anyone.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	s.arrivals.Store(0)
	cutoff := s.now().Add(-s.retention.MaxAge).UnixMilli()
	removed := 0
	for {
		n, err := s.sweepChunk(ctx, func(pgx.Tx) (string, []any, error) {
			return `SELECT seq FROM tasks WHERE state = ANY($1) AND status_ts < $2
				UNION ALL
				SELECT seq FROM tasks WHERE state = ANY($1) AND status_ts IS NULL AND created < $2
				LIMIT $3`, []any{terminalStates, cutoff, sweepChunk}, nil
		})
		removed += n
		if err != nil {
			return removed, err
		}
		if n < sweepChunk {
			break
		}
	}
	for {
		n, err := s.sweepChunk(ctx, func(tx pgx.Tx) (string, []any, error) {
			var ended int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE state = ANY($1)`, terminalStates).Scan(&ended); err != nil {
				return "", nil, err
			}
			excess := min(ended-s.retention.MaxTasks, sweepChunk)
			if excess <= 0 {
				return "", nil, nil
			}
			return `SELECT seq FROM tasks WHERE state = ANY($1) ORDER BY state = $2 DESC, seq LIMIT $3`,
				[]any{terminalStates, string(a2a.TaskStateRejected), excess}, nil
		})
		removed += n
		if err != nil {
			return removed, err
		}
		if n == 0 {
			break
		}
	}
	return removed, nil
}

// sweepChunk removes, in one transaction, the tasks whose seq the query that choose returns selects (""
// selects none), and tells Config.Removed. It returns how many it removed.
func (s *Store) sweepChunk(ctx context.Context, choose func(tx pgx.Tx) (string, []any, error)) (int, error) {
	var gone []a2a.TaskID
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Without waiting for the WAL flush: a removal lost in a crash is made again by the next sweep.
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		query, args, err := choose(tx)
		if err != nil || query == "" {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM tasks WHERE seq IN (`+query+`) RETURNING id`, args...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			gone = append(gone, a2a.TaskID(id))
		}
		return nil
	})
	if err != nil {
		return 0, s.fail("removing old tasks", "the member keeps running and sweeps again later", err)
	}
	s.forget(gone)
	if s.removed != nil && len(gone) > 0 {
		s.removed(gone)
	}
	return len(gone), nil
}

// forget drops from the cache of a member of one process the tasks of ids, which a statement outside
// the writer changed or removed, once committed: their next read is the database's. (Reap and
// RequestCancel, which are replicas', forget what they end too, should a member of one process call
// them.)
func (s *Store) forget(ids []a2a.TaskID) {
	if s.cache == nil || len(ids) == 0 {
		return
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	for _, id := range ids {
		s.cache.Remove(id)
	}
}
