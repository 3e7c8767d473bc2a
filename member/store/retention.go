package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
)

// The sweeper runs every sweepEvery, and sooner once sweepAfter tasks have arrived since its last run,
// so that a flood cannot grow the store far beyond max_tasks between two runs. It removes sweepChunk
// tasks per transaction, without an fsync, each chunk giving way to admitted tasks' writes as the batch
// writer's do, and after a large removal checkpoints the write-ahead log so that it can be cut back.
const (
	sweepEvery = time.Minute
	sweepChunk = 256
)

// terminalStates are the states of tasks that have ended: the only ones retention removes.
var terminalStates = []any{
	string(a2a.TaskStateCompleted), string(a2a.TaskStateFailed),
	string(a2a.TaskStateCanceled), string(a2a.TaskStateRejected),
}

// Retention returns what the store keeps: its configured retention with the defaults filled in.
func (s *Store) Retention() roster.Retention { return s.retention }

// sweepAfter is how many arrivals wake the sweeper early: a tenth of max_tasks, at least 100.
func (s *Store) sweepAfter() int64 { return max(int64(s.retention.MaxTasks/10), 100) }

// arrived counts n new tasks and wakes the sweeper when enough have arrived since its last run.
func (s *Store) arrived(n int) {
	if s.arrivals.Add(int64(n)) >= s.sweepAfter() {
		select {
		case s.sweepKick <- struct{}{}:
		default:
		}
	}
}

// sweepLoop is the retention sweeper: it runs from OpenWith until Close ends ctx.
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
	}
}

// Sweep removes the ended tasks the store's retention no longer keeps: every one whose last status is
// older than MaxAge (by the store's clock), then, while more than MaxTasks ended tasks remain, the
// oldest of them, rejected tasks first. Tasks that are submitted, working or waiting for input are
// never removed. It returns how many tasks it removed. The background sweeper calls it; so may anyone.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	s.arrivals.Store(0)
	if s.untouched() {
		// Nothing to remove, and asking SQLite would connect the writer of every idle member of a
		// formation each minute (its memory, the -wal and -shm files), for nothing.
		return 0, nil
	}
	cutoff := s.now().Add(-s.retention.MaxAge).UnixMilli()
	removed := 0
	for {
		n, err := s.sweepChunk(ctx, func(*sql.Tx) (string, []any, error) {
			return `SELECT seq FROM tasks WHERE state IN (?, ?, ?, ?) AND status_ts < ?
				UNION ALL
				SELECT seq FROM tasks WHERE state IN (?, ?, ?, ?) AND status_ts IS NULL AND created < ?
				LIMIT ?`,
				append(append(append(append([]any{}, terminalStates...), cutoff), terminalStates...), cutoff, sweepChunk), nil
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
		n, err := s.sweepChunk(ctx, func(tx *sql.Tx) (string, []any, error) {
			var ended int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE state IN (?, ?, ?, ?)`, terminalStates...).Scan(&ended); err != nil {
				return "", nil, err
			}
			excess := min(ended-s.retention.MaxTasks, sweepChunk)
			if excess <= 0 {
				return "", nil, nil
			}
			return `SELECT seq FROM tasks WHERE state IN (?, ?, ?, ?) ORDER BY state = ? DESC, seq LIMIT ?`,
				append(append([]any{}, terminalStates...), string(a2a.TaskStateRejected), excess), nil
		})
		removed += n
		if err != nil {
			return removed, err
		}
		if n == 0 {
			break
		}
	}
	if removed >= sweepChunk && s.awaitQuiet(ctx) {
		// Copy what the log holds back into the database, so that the next write starts the log over
		// and journal_size_limit cuts it back. PASSIVE: it never waits for readers.
		s.wmu.Lock()
		_, err := s.write.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		s.wmu.Unlock()
		if err != nil {
			return removed, fmt.Errorf("member: checkpointing the task store: %w", err)
		}
	}
	return removed, nil
}

// sweepChunk removes, in one transaction without an fsync of its own (a removal lost in a crash is
// made again by the next sweep), the tasks whose seq the query that choose returns selects ("" selects
// none), and drops them from the cache. It returns how many it removed.
func (s *Store) sweepChunk(ctx context.Context, choose func(tx *sql.Tx) (string, []any, error)) (int, error) {
	if !s.awaitQuiet(ctx) {
		return 0, ctx.Err()
	}
	// Config.Removed hears of the removed tasks after the write lock is let go: it may take its time
	// (files to delete), and the writers need not wait for it.
	var gone []a2a.TaskID
	defer func() {
		if s.removed != nil && len(gone) > 0 {
			s.removed(gone)
		}
	}()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var ids []a2a.TaskID
	err := s.unsynced(ctx, func(tx *sql.Tx) error {
		query, args, err := choose(tx)
		if err != nil || query == "" {
			return err
		}
		rows, err := tx.QueryContext(ctx, `DELETE FROM tasks WHERE seq IN (`+query+`) RETURNING id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, a2a.TaskID(id))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		s.hook("sweep", len(ids))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("member: removing old tasks: %w", err)
	}
	for _, id := range ids {
		s.cache.remove(id)
	}
	gone = ids
	return len(ids), nil
}
