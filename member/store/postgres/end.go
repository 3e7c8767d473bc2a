package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/store"
)

// The statements that end tasks, each with the JSON endedBodies gives it.
const (
	// endSQL gives the tasks of $3 (with their new JSON in $4) state $1 and status time $2.
	endSQL = `UPDATE tasks AS t SET state = $1, status_ts = $2, task = v.task, version = t.version + 1
		FROM unnest($3::text[], $4::bytea[]) AS v(id, task) WHERE t.id = v.id`
	// endFreedSQL is endSQL that also takes the tasks from their owner: the tasks of a replica ended by
	// another (Reap, RequestCancel) or by its successor (Recover), which a process of the ended
	// replica still running unawares must no longer write (store.ErrNotOwner).
	endFreedSQL = `UPDATE tasks AS t SET state = $1, status_ts = $2, task = v.task, version = t.version + 1, owner = ''
		FROM unnest($3::text[], $4::bytea[]) AS v(id, task) WHERE t.id = v.id`
)

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
