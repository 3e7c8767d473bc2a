package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// RestartMessage is the status message of a task that was running when its member stopped and that
// Recover ended failed.
const RestartMessage = "member restarted: the task was interrupted and did not finish"

// unfinishedStates are the states of the tasks Recover ends: every state but the terminal ones.
var unfinishedStates = []any{
	string(a2a.TaskStateSubmitted), string(a2a.TaskStateWorking),
	string(a2a.TaskStateInputRequired), string(a2a.TaskStateAuthRequired),
}

// Recover ends failed, with RestartMessage and a status timestamp of now, every task that was not in a
// terminal state: the member stopped while it ran or waited, and nothing will finish it. It returns
// the ids of the tasks it changed, in creation order. Call it once, before the store takes new tasks.
func (s *Store) Recover(ctx context.Context, now time.Time) (changed []a2a.TaskID, err error) {
	if s.untouched() {
		return nil, nil // nothing ran in it
	}
	s.fg.begin()
	defer s.fg.end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// Most starts find nothing to end: asked on the read pool, which is open already, that costs no
	// write transaction, and a new store's writer stays unconnected until its first write.
	var unfinished bool
	if err := s.read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE state IN (?, ?, ?, ?))`,
		unfinishedStates...).Scan(&unfinished); err != nil {
		return nil, fmt.Errorf("member: recovering tasks: %w", err)
	}
	if !unfinished {
		return nil, nil
	}
	type row struct {
		caller string
		body   []byte
	}
	written := map[a2a.TaskID]row{}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("member: recovering tasks: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, `SELECT id, task FROM tasks WHERE state IN (?, ?, ?, ?) ORDER BY seq`, unfinishedStates...)
	if err != nil {
		return nil, fmt.Errorf("member: recovering tasks: %w", err)
	}
	var tasks []*a2a.Task
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			rows.Close()
			return nil, fmt.Errorf("member: recovering tasks: %w", err)
		}
		t, err := Decode(a2a.TaskID(id), body)
		if err != nil {
			rows.Close()
			return nil, err
		}
		tasks = append(tasks, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("member: recovering tasks: %w", err)
	}
	for _, t := range tasks {
		t.Status = a2a.TaskStatus{
			State: a2a.TaskStateFailed,
			Message: &a2a.Message{
				MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
				Role:      a2a.RoleAgent,
				Parts:     []a2a.Part{a2a.TextPart(RestartMessage)},
				TaskID:    t.ID,
				ContextID: t.ContextID,
			},
			Timestamp: a2a.NewTimestamp(now),
		}
		body, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("member: recovering task %s: %w", t.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = ?, status_ts = ?, task = ? WHERE id = ?`,
			string(t.Status.State), statusMillis(t), body, string(t.ID)); err != nil {
			return nil, fmt.Errorf("member: recovering task %s: %w", t.ID, err)
		}
		changed = append(changed, t.ID)
		written[t.ID] = row{taskCaller(t), body}
	}
	s.hook("recover", len(tasks))
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("member: recovering tasks: %w", err)
	}
	for id, w := range written {
		s.cache.put(id, w.caller, w.body)
	}
	return changed, nil
}

// untouched reports whether the store is a file this process wrote (empty, at the newest schema) that
// no task has been handed to since: it holds no task, and nothing need read or write its file to know.
func (s *Store) untouched() bool {
	return s.created && s.writeSeq.Load() == 0 && !s.batched.Load()
}
