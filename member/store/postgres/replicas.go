package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// The replicas of one member (DESIGN §16, store.Replicated): each task row names its owner, the replica
// that runs it; a replica's lease is a row of replicas it renews; every change of a task is told on
// channel murmur_tasks by a trigger (schema.go).

var (
	_ store.Replicated = (*Store)(nil)
	_ store.EventLog   = (*Store)(nil)
)

// The states of a task, as SQL lists: an index's predicate (schema.go) is matched by the planner only
// against constants, not against a parameter.
const (
	// runningSQL: a task its owner is running, not merely queued.
	runningSQL = `('` + string(a2a.TaskStateWorking) + `', '` + string(a2a.TaskStateInputRequired) + `', '` +
		string(a2a.TaskStateAuthRequired) + `')`
	// unendedSQL: a task not in a terminal state (a2a.TaskState.Terminal).
	unendedSQL = `('` + string(a2a.TaskStateSubmitted) + `', '` + string(a2a.TaskStateWorking) + `', '` +
		string(a2a.TaskStateInputRequired) + `', '` + string(a2a.TaskStateAuthRequired) + `')`
	submittedSQL = `'` + string(a2a.TaskStateSubmitted) + `'`
)

// offerLock is the key of the transaction-level advisory lock under which Offer counts the places left
// ("murmur" and 2 in ASCII), so that two offers do not both take the last one.
const offerLock = 0x6d75726d757232

// notOwned is the error of replica me's write of task id, which owner owns ("" when nobody does).
func notOwned(id a2a.TaskID, me, owner string) error {
	if owner == "" {
		return fmt.Errorf("member: storing task %s: %w (replica %s no longer owns it: it was reaped or released, and no replica has claimed it since)",
			id, store.ErrNotOwner, me)
	}
	return fmt.Errorf("member: storing task %s: %w (replica %s owns it, not %s)", id, store.ErrNotOwner, owner, me)
}

// Replica is this process's replica name (Config.Replica).
func (s *Store) Replica() string { return s.replica }

// Renew writes this replica's lease: until s's clock's now plus lease, with free. The first Renew of a
// process creates the row (or takes over the one its dead predecessor of the same name left, as its
// new start); every later one only updates it, and answers false, creating nothing, once the row is
// gone: another replica reaped this one (store.Replicated).
func (s *Store) Renew(ctx context.Context, lease time.Duration, free int) (bool, error) {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	now := s.now()
	until := now.Add(lease).UnixMilli()
	if !s.renewed {
		_, err := s.pool.Exec(ctx, `INSERT INTO replicas (name, started, lease_until, free) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET started = $2, lease_until = $3, free = $4`, s.replica, now.UnixMilli(), until, free)
		if err != nil {
			return false, s.fail("writing replica "+s.replica+"'s lease", renewAgain, err)
		}
		s.renewed = true
		return true, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE replicas SET lease_until = $2, free = $3 WHERE name = $1`, s.replica, until, free)
	if err != nil {
		return false, s.fail("renewing replica "+s.replica+"'s lease", renewAgain, err)
	}
	return tag.RowsAffected() == 1, nil
}

const renewAgain = "the replica renews it again at its next renewal, before its lease lapses if the database is back by then"

// Reap ends the replicas other than this one whose lease lapsed before now (store.Replicated), each in
// a transaction of its own that locks its lease row first (FOR UPDATE SKIP LOCKED): two replicas
// reaping at once each reap a replica once, and a replica renewing at that moment is either renewed
// first (and not reaped) or reaped (and told so by Renew). It returns the ids it ended, in creation
// order per replica; when a replica could not be reaped (the database failed, or one of its tasks
// cannot be decoded) it still reaps the others, and returns the ids it ended with the errors.
func (s *Store) Reap(ctx context.Context, now time.Time) ([]a2a.TaskID, error) {
	var ended []a2a.TaskID
	var errs []error
	failed := []string{} // the replicas whose reaping failed: not tried again in this Reap
	for {
		var name string
		var ids []a2a.TaskID
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT name FROM replicas WHERE lease_until < $1 AND name <> $2 AND name <> ALL($3)
				ORDER BY name LIMIT 1 FOR UPDATE SKIP LOCKED`, now.UnixMilli(), s.replica, failed).Scan(&name)
			if err != nil {
				return err
			}
			if ids, err = s.release(ctx, tx, name, now); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM replicas WHERE name = $1`, name)
			return err
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ended, errors.Join(errs...)
		case err != nil && name == "":
			errs = append(errs, s.fail("looking for replicas whose lease lapsed", reapAgain, err))
			return ended, errors.Join(errs...)
		case err != nil:
			errs = append(errs, s.fail("ending the tasks of replica "+name+", whose lease lapsed", reapAgain, err))
			if ctx.Err() != nil || unreachable(err) {
				return ended, errors.Join(errs...)
			}
			failed = append(failed, name)
		default:
			ended = append(ended, ids...)
			s.forget(ids)
		}
	}
}

const reapAgain = "the replica tries again at its next look"

// recoverReplica is Recover for a replica: its previous process is dead (this one holds its name's
// lock), so the tasks it ran end failed and the ones it had claimed but not started are released to
// any replica.
func (s *Store) recoverReplica(ctx context.Context, now time.Time) ([]a2a.TaskID, error) {
	var ended []a2a.TaskID
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		ended, err = s.release(ctx, tx, s.replica, now)
		return err
	})
	if err != nil {
		return nil, s.fail("recovering replica "+s.replica+"'s tasks", retryWrite, err)
	}
	return ended, nil
}

// release ends, in tx, the running tasks of replica owner TASK_STATE_FAILED with store.RestartMessage
// at now, as Recover ends a process's, taking them from owner (endFreedSQL), and makes its submitted
// tasks unclaimed. It returns the ids it ended, in creation order. A task it cannot decode fails it: it
// would stay running forever.
func (s *Store) release(ctx context.Context, tx pgx.Tx, owner string, now time.Time) ([]a2a.TaskID, error) {
	rows, err := tx.Query(ctx, `SELECT id, task FROM tasks WHERE owner = $1 AND state IN `+runningSQL+` ORDER BY seq FOR UPDATE`, owner)
	if err != nil {
		return nil, err
	}
	var ts []*a2a.Task
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			return nil, err
		}
		t, err := store.Decode(a2a.TaskID(id), body)
		if err != nil {
			rows.Close()
			return nil, err
		}
		ts = append(ts, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var ended []a2a.TaskID
	if len(ts) > 0 {
		ids, bodies, err := endedBodies(ts, a2a.TaskStateFailed, store.RestartMessage, now)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, endFreedSQL, string(a2a.TaskStateFailed), now.UnixMilli(), ids, bodies); err != nil {
			return nil, err
		}
		for _, t := range ts {
			ended = append(ended, t.ID)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET owner = '', version = version + 1 WHERE owner = $1 AND state = `+submittedSQL, owner); err != nil {
		return nil, err
	}
	return ended, nil
}

// Claim makes this replica the owner of up to n unclaimed submitted tasks, oldest first, and returns
// them (store.Replicated). Two replicas claiming at once skip each other's rows (FOR UPDATE SKIP
// LOCKED): a task is claimed once. A claimed task whose stored JSON cannot be decoded is logged and
// left out (it stays this replica's until its next Recover).
func (s *Store) Claim(ctx context.Context, n int) ([]*a2a.Task, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE tasks SET owner = $1, version = version + 1
		WHERE id IN (SELECT id FROM tasks WHERE owner = '' AND state = `+submittedSQL+` ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING seq, id, task`, s.replica, n)
	if err != nil {
		return nil, s.fail("claiming tasks", retryRead, err)
	}
	type claimed struct {
		seq  int64
		task *a2a.Task
	}
	var got []claimed
	for rows.Next() {
		var c claimed
		var id string
		var body []byte
		if err := rows.Scan(&c.seq, &id, &body); err != nil {
			rows.Close()
			return nil, s.fail("claiming tasks", retryRead, err)
		}
		if c.task, err = store.Decode(a2a.TaskID(id), body); err != nil {
			s.log.Error("a claimed task cannot be read: it is left as it is", "task", id, "err", err)
			continue
		}
		got = append(got, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail("claiming tasks", retryRead, err)
	}
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Compare(a.seq, b.seq) }) // RETURNING keeps no order
	ts := make([]*a2a.Task, len(got))
	for i, c := range got {
		ts[i] = c.task
	}
	return ts, nil
}

// Traceparent reads the W3C traceparent stored with task id: that of the request that sent it, which
// the replica that claims it continues (DESIGN §17); "" when the request carried none, and for a task
// not stored.
func (s *Store) Traceparent(ctx context.Context, id a2a.TaskID) (string, error) {
	var tp string
	err := s.pool.QueryRow(ctx, `SELECT traceparent FROM tasks WHERE id = $1`, string(id)).Scan(&tp)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.fail("reading the trace context of task "+string(id), retryRead, err)
	}
	return tp, nil
}

// Offer stores t, a new submitted task, unclaimed when the member's live replicas have room for it
// (store.Replicated): the row Create would store, with no owner. The places are counted under a
// transaction-level advisory lock (offerLock), so two offers never both take the last one. Live is
// by s's clock: a lease until now or later.
func (s *Store) Offer(ctx context.Context, t *a2a.Task, perReplica int) (bool, error) {
	r := taskRow(t, true)
	if r.err != nil {
		return false, r.err
	}
	now := s.now().UnixMilli()
	r.created = now
	s.messages.Add(r.caller, r.message) // nil in a replica; as Create does
	if ts := t.Status.Timestamp; ts != nil {
		r.created = ts.UnixMilli()
	}
	offered := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(offerLock)); err != nil {
			return err
		}
		var live, busy int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE lease_until >= $1`, now).Scan(&live); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE state IN `+unendedSQL+`
			AND (owner = '' OR owner IN (SELECT name FROM replicas WHERE lease_until >= $1))`, now).Scan(&busy); err != nil {
			return err
		}
		if busy >= perReplica*live {
			return nil
		}
		insert := insertSQL
		if r.message != "" {
			// One task per message, as a replica's Create stores it (insertOnceSQL).
			if _, err := tx.Exec(ctx, messageLockSQL, r.caller, r.message); err != nil {
				return err
			}
			insert = insertOnceSQL
		}
		tag, err := tx.Exec(ctx, insert, string(r.id), r.context, r.state, r.ts, r.created, r.caller, r.body, r.message, "", conv.Traceparent(ctx))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errDuplicate
		}
		offered = true
		return nil
	})
	if errors.Is(err, errDuplicate) {
		if other, gerr := s.GetByMessage(ctx, r.caller, r.message); r.message != "" && gerr == nil && other.ID != t.ID {
			return false, fmt.Errorf("member: offering task %s: %w", t.ID, store.ErrSentBefore)
		}
		return false, fmt.Errorf("member: storing task %s: a task with this id is already stored", t.ID)
	}
	if err != nil {
		return false, s.fail("offering task "+string(t.ID)+" to the member's replicas", retryWrite, err)
	}
	if offered {
		s.arrived(1)
	}
	return offered, nil
}

// errDuplicate is Offer's task whose id is already stored, out of its transaction.
var errDuplicate = errors.New("a task with this id is already stored")

// RequestCancel asks for task id's cancellation (store.Replicated), in one transaction that locks the
// task's row. A task a live replica other than this one owns is marked (cancel_requested, which Watch
// reports as Notice.Cancel until the task ends); an unclaimed one, or one whose owner's lease lapsed
// before now (or that has no lease row), is ended TASK_STATE_CANCELED as EndAll ends a task, and taken
// from its owner (endFreedSQL). owner is the task's owner before the call ("" for an ended task); the
// error wraps store.ErrNotFound when no task id is stored.
func (s *Store) RequestCancel(ctx context.Context, id a2a.TaskID, text string, now time.Time) (owner string, ended bool, err error) {
	if !storable(string(id)) {
		return "", false, notfound.Task(id)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var state string
		var body []byte
		err := tx.QueryRow(ctx, `SELECT owner, state, task FROM tasks WHERE id = $1 FOR UPDATE`, string(id)).Scan(&owner, &state, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return notfound.Task(id)
		}
		if err != nil {
			return err
		}
		if a2a.TaskState(state).Terminal() {
			owner = ""
			return nil
		}
		if owner == s.replica {
			return nil // its own: the caller stops it
		}
		if owner != "" {
			var live bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM replicas WHERE name = $1 AND lease_until >= $2)`,
				owner, now.UnixMilli()).Scan(&live); err != nil {
				return err
			}
			if live {
				_, err := tx.Exec(ctx, `UPDATE tasks SET cancel_requested = true, version = version + 1 WHERE id = $1`, string(id))
				return err
			}
		}
		// Nobody runs it, or its replica is dead: it ends here.
		t, err := store.Decode(id, body)
		if err != nil {
			return err
		}
		ids, bodies, err := endedBodies([]*a2a.Task{t}, a2a.TaskStateCanceled, text, now)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, endFreedSQL, string(a2a.TaskStateCanceled), now.UnixMilli(), ids, bodies); err != nil {
			return err
		}
		ended = true
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false, err
	}
	if err != nil {
		return "", false, s.fail("canceling task "+string(id), retryWrite, err)
	}
	if ended {
		s.forget([]a2a.TaskID{id})
	}
	return owner, ended, nil
}

// Replicas lists the member's replicas with a lease row, live or lapsed, ordered by name
// (store.Replicated).
func (s *Store) Replicas(ctx context.Context) ([]store.ReplicaInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, started, lease_until, free FROM replicas ORDER BY name`)
	if err != nil {
		return nil, s.fail("reading the replicas", retryRead, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ReplicaInfo, error) {
		var ri store.ReplicaInfo
		var started, until int64
		err := r.Scan(&ri.Name, &started, &until, &ri.Free)
		ri.Started, ri.LeaseUntil = time.UnixMilli(started).UTC(), time.UnixMilli(until).UTC()
		return ri, err
	})
	if err != nil {
		return nil, s.fail("reading the replicas", retryRead, err)
	}
	return out, nil
}
