package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// EndAll gives every task of ids that the store holds the terminal status state, with text as its status
// message (a message of its own for each task, as a2a.TaskStatus marshals it) and now as its timestamp,
// in one transaction and one UPDATE statement: the status is replaced inside the stored JSON
// (json_set), so the rest of each task is not decoded nor marshalled again and stays byte for byte what
// it was. It is for ending thousands of queued tasks at once (a shutdown, a deadline): the cost is a
// query and a statement, not a decode and an encode a task. It returns the ids it ended, in the order of
// ids, once the transaction is durable; a task the store does not hold is left out.
func (s *Store) EndAll(ctx context.Context, taskIDs []a2a.TaskID, state a2a.TaskState, text string, now time.Time) ([]a2a.TaskID, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(taskIDs)
	if err != nil {
		return nil, fmt.Errorf("member: ending tasks: %w", err)
	}
	// The timestamp as a2a.Timestamp marshals it (and as statusMillis stores it), once for all.
	ts := a2a.NewTimestamp(now)
	millis := ts.UnixMilli()
	s.fg.begin()
	defer s.fg.end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.flushSoonLocked() // a task CreateLater handed over is ended too, after its other writes
	// No explicit transaction: the UPDATE alone is one (the write lock keeps other writers out between the
	// read and it), and a statement that is its own transaction needs no statement journal, which for
	// 20,000 rows costs a tenth of the time.
	contexts, err := taskContexts(ctx, s.write, list)
	if err != nil {
		return nil, err
	}
	// Each task's status as json.Marshal writes it, under its id: {id: status, …}.
	status, err := newStatusTemplate(state, text, ts)
	if err != nil {
		return nil, err
	}
	statuses := make([]byte, 0, 256*len(contexts))
	statuses = append(statuses, '{')
	ended := make([]a2a.TaskID, 0, len(contexts))
	for _, id := range taskIDs {
		cid, ok := contexts[id]
		if !ok {
			continue
		}
		delete(contexts, id) // an id given twice is ended once
		if len(ended) > 0 {
			statuses = append(statuses, ',')
		}
		statuses = append(appendJSONString(statuses, string(id)), ':')
		if statuses, err = status.append(statuses, id, cid); err != nil {
			return nil, err
		}
		ended = append(ended, id)
	}
	if len(ended) == 0 {
		return nil, nil
	}
	statuses = append(statuses, '}')
	s.hook(opUpdate, len(ended))
	if _, err := s.write.ExecContext(ctx, endAllSQL, string(state), millis, string(statuses)); err != nil {
		return nil, fmt.Errorf("member: ending tasks: %w", err)
	}
	// The cache held the tasks as they were: the next read takes them from the file.
	for _, id := range ended {
		s.cache.remove(id)
	}
	return ended, nil
}

// endAllSQL ends the tasks of a JSON object of their statuses by id (?3): state ?1, status_ts ?2.
const endAllSQL = `UPDATE tasks SET state = ?1, status_ts = ?2, task = json_set(task, '$.status', json(e.value))
	FROM json_each(?3) AS e WHERE tasks.id = e.key`

// taskContexts reads the context id of each stored task of list (a JSON array of ids), in one query.
func taskContexts(ctx context.Context, db *sql.DB, list []byte) (map[a2a.TaskID]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, context_id FROM tasks WHERE id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("member: ending tasks: %w", err)
	}
	defer rows.Close()
	contexts := map[a2a.TaskID]string{}
	for rows.Next() {
		var id, cid string
		if err := rows.Scan(&id, &cid); err != nil {
			return nil, fmt.Errorf("member: ending tasks: %w", err)
		}
		contexts[a2a.TaskID(id)] = cid
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("member: ending tasks: %w", err)
	}
	return contexts, nil
}

// statusTemplate writes the status EndAll gives each task byte for byte as json.Marshal writes its
// a2a.TaskStatus, without marshalling each: the status is marshalled once with a placeholder for each
// string that differs from task to task (its message's id, task id and context id), and each task's
// status is the template's pieces with its own strings between them.
type statusTemplate struct {
	state a2a.TaskState
	text  string
	ts    *a2a.Timestamp
	lits  [][]byte // the template's bytes around the holes; len(holes)+1 of them
	holes []int    // which string each hole takes: holeMessage, holeContext, holeTask
}

const (
	holeMessage = iota
	holeContext
	holeTask
)

// placeholders are strings no message, context or task id is: each marshals as a quoted \u0000….
var placeholders = [...]string{holeMessage: "\x00message", holeContext: "\x00context", holeTask: "\x00task"}

func newStatusTemplate(state a2a.TaskState, text string, ts *a2a.Timestamp) (*statusTemplate, error) {
	t := &statusTemplate{state: state, text: text, ts: ts}
	tmpl, err := json.Marshal(t.status(placeholders[holeMessage], placeholders[holeTask], placeholders[holeContext]))
	if err != nil {
		return nil, fmt.Errorf("member: ending tasks: %w", err)
	}
	type at struct{ pos, n, hole int }
	var found []at
	for hole, p := range placeholders {
		q, _ := json.Marshal(p)
		if i := bytes.Index(tmpl, q); i >= 0 {
			found = append(found, at{i, len(q), hole})
		}
	}
	slices.SortFunc(found, func(a, b at) int { return cmp.Compare(a.pos, b.pos) })
	last := 0
	for _, f := range found {
		t.lits = append(t.lits, tmpl[last:f.pos])
		t.holes = append(t.holes, f.hole)
		last = f.pos + f.n
	}
	t.lits = append(t.lits, tmpl[last:])
	return t, nil
}

// status is the status of task id in context cid, with the message id mid.
func (t *statusTemplate) status(mid, id, cid string) a2a.TaskStatus {
	st := a2a.TaskStatus{State: t.state, Timestamp: t.ts}
	if t.text != "" {
		st.Message = &a2a.Message{
			MessageID: a2a.MessageID(mid),
			Role:      a2a.RoleAgent,
			Parts:     []a2a.Part{a2a.TextPart(t.text)},
			TaskID:    a2a.TaskID(id),
			ContextID: cid,
		}
	}
	return st
}

// append appends the status of task id, in context cid, with a new message id, to dst.
func (t *statusTemplate) append(dst []byte, id a2a.TaskID, cid string) ([]byte, error) {
	var mid string
	if t.text != "" {
		mid = ids.New(ids.PrefixMessage)
	}
	if cid == "" && t.text != "" {
		// The message's contextId is omitted when empty, and the template has it: marshal this one.
		body, err := json.Marshal(t.status(mid, string(id), cid))
		if err != nil {
			return nil, fmt.Errorf("member: ending task %s: %w", id, err)
		}
		return append(dst, body...), nil
	}
	for i, hole := range t.holes {
		dst = append(dst, t.lits[i]...)
		switch hole {
		case holeMessage:
			dst = appendJSONString(dst, mid)
		case holeContext:
			dst = appendJSONString(dst, cid)
		case holeTask:
			dst = appendJSONString(dst, string(id))
		}
	}
	return append(dst, t.lits[len(t.holes)]...), nil
}

// appendJSONString appends s quoted as json.Marshal quotes it: as it is when it holds only printable
// ASCII that json.Marshal leaves alone, through json.Marshal otherwise.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
