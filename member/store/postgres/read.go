package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// Get returns the stored task with the given id, a copy the caller may change. The error wraps
// store.ErrNotFound when the store has no such task.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	body, _, err := s.getJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	return store.Decode(id, body)
}

// GetByMessage returns the newest stored task that the message messageID of caller created and that was
// not rejected (store.Tasks).
func (s *Store) GetByMessage(ctx context.Context, caller, messageID string) (*a2a.Task, error) {
	if messageID == "" || !storable(caller) || !storable(messageID) {
		return nil, notfound.Task("")
	}
	if ok, err := s.messages.MayHold(ctx, caller, messageID, s.loadMessages); err != nil || !ok {
		if err == nil {
			return nil, notfound.Task("")
		}
		return nil, s.fail("looking up message "+messageID, retryRead, err)
	}
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM tasks WHERE caller = $1 AND message_id = $2 AND message_id <> '' AND state <> $3 ORDER BY seq DESC LIMIT 1`,
		caller, messageID, string(a2a.TaskStateRejected)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notfound.Task("")
	}
	if err != nil {
		return nil, s.fail("looking up message "+messageID, retryRead, err)
	}
	return s.Get(ctx, a2a.TaskID(id))
}

// getJSON reads the stored task's JSON and the member that sent it.
func (s *Store) getJSON(ctx context.Context, id a2a.TaskID) (body []byte, caller string, err error) {
	if body, caller, ok := s.pending.Get(id); ok {
		return body, caller, nil
	}
	if body, caller, ok := s.cache.Get(id); ok {
		return body, caller, nil
	}
	if !storable(string(id)) {
		return nil, "", notfound.Task(id)
	}
	mark := s.cache.Mark()
	err = s.pool.QueryRow(ctx, `SELECT task, caller FROM tasks WHERE id = $1`, string(id)).Scan(&body, &caller)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", notfound.Task(id)
	}
	if err != nil {
		return nil, "", s.fail("reading task "+string(id), retryRead, err)
	}
	// The next read of it is the cache's (an old task polled again).
	s.cache.Fill(id, caller, body, mark)
	return body, caller, nil
}

// followSQL reads a task and its events after $2 in one statement, so in one snapshot, the events in
// one pass over the task's rows of task_events.
const followSQL = `SELECT t.task, t.state, t.event_seq, COALESCE(e.seqs, '{}'), COALESCE(e.events, '{}')
	FROM tasks t LEFT JOIN LATERAL (
		SELECT array_agg(seq ORDER BY seq) AS seqs, array_agg(event ORDER BY seq) AS events
		FROM task_events WHERE task_id = t.id AND seq > $2 AND seq <= t.event_seq) e ON true
	WHERE t.id = $1`

// Follow reads task id as committed, its last event's number, and its events after after, in one
// snapshot (store.EventLog). UpdateSoon's changes not yet committed are not seen: a stream learns of
// them with their events once they are.
func (s *Store) Follow(ctx context.Context, id a2a.TaskID, after int64) (store.Followed, error) {
	if !storable(string(id)) {
		return store.Followed{}, notfound.Task(id)
	}
	var f store.Followed
	var state string
	var seqs []int64
	var evs [][]byte
	err := s.pool.QueryRow(ctx, followSQL, string(id), after).Scan(&f.Task, &state, &f.Seq, &seqs, &evs)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Followed{}, notfound.Task(id)
	}
	if err != nil {
		return store.Followed{}, s.fail("reading the events of task "+string(id), retryRead, err)
	}
	f.State = a2a.TaskState(state)
	if len(seqs) != len(evs) {
		return store.Followed{}, fmt.Errorf("reading the events of task %s: %d numbers for %d events", id, len(seqs), len(evs))
	}
	f.Events = make([]store.Logged, len(seqs))
	for i := range seqs {
		f.Events[i] = store.Logged{Seq: seqs[i], Event: evs[i]}
	}
	return f, nil
}

// GetInScope returns a stored task in scope, whole, as its JSON: the bytes json.Marshal wrote. A task
// outside the scope is not stored (store.ErrNotFound, the same error). The caller must not modify the
// bytes.
func (s *Store) GetInScope(ctx context.Context, id a2a.TaskID, sc store.Scope) ([]byte, error) {
	body, caller, err := s.getJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sc.Sees(caller) {
		return nil, notfound.Task(id)
	}
	return body, nil
}

// GetAll returns the stored tasks of ids, in the order of ids, leaving out those the store does not
// hold, read in one query. A task that cannot be decoded is left out and its error returned with the
// others.
func (s *Store) GetAll(ctx context.Context, taskIDs []a2a.TaskID) ([]*a2a.Task, error) {
	list := make([]string, 0, len(taskIDs))
	bodies := make(map[a2a.TaskID][]byte, len(taskIDs))
	for _, id := range taskIDs {
		if body, _, ok := s.pending.Get(id); ok {
			bodies[id] = body
		} else if body, _, ok := s.cache.Get(id); ok {
			bodies[id] = body
		} else if storable(string(id)) {
			list = append(list, string(id))
		}
	}
	if len(list) > 0 {
		rows, err := s.pool.Query(ctx, `SELECT id, task FROM tasks WHERE id = ANY($1)`, list)
		if err != nil {
			return nil, s.fail("reading tasks", retryRead, err)
		}
		for rows.Next() {
			var id string
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return nil, s.fail("reading tasks", retryRead, err)
			}
			bodies[a2a.TaskID(id)] = body
		}
		if err := rows.Err(); err != nil {
			return nil, s.fail("reading tasks", retryRead, err)
		}
	}
	ts := make([]*a2a.Task, 0, len(taskIDs))
	var errs []error
	for _, id := range taskIDs {
		body, ok := bodies[id]
		if !ok {
			continue
		}
		t, err := store.Decode(id, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts = append(ts, t)
	}
	return ts, errors.Join(errs...)
}

// ListInScope returns one page of the tasks in scope that match q, newest first (by creation), with the
// number of matching tasks on all pages, both from one snapshot. A page holds q.PageSize tasks, or fewer
// once it holds 4 MB of JSON (store.ReadPage); its next page token continues after its last task, for q's filter
// only (another filter's token is refused with an error wrapping a2a.ErrInvalidParams).
func (s *Store) ListInScope(ctx context.Context, q store.ListQuery, sc store.Scope) (store.ListPage, error) {
	switch {
	case sc.All():
	case sc.Caller() == "":
		return store.ListPage{}, nil
	default:
		q.Caller = sc.Caller()
	}
	var cursor int64
	if q.PageToken != "" {
		c, err := store.PageCursor(q.PageToken, q)
		if err != nil {
			return store.ListPage{}, err
		}
		cursor = c
	}
	if !storable(q.Caller) || !storable(q.ContextID) || !storable(string(q.State)) {
		return store.ListPage{}, nil // no task has such a column
	}
	l := pageQuery(q, cursor)

	// One snapshot for the total and the page.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return store.ListPage{}, s.fail("listing tasks", retryRead, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM tasks`+l.filter, l.args[:l.filterArgs]...).Scan(&total); err != nil {
		return store.ListPage{}, s.fail("listing tasks", retryRead, err)
	}
	page, err := s.readPage(ctx, tx, l, q)
	if err != nil {
		return store.ListPage{}, err
	}
	page.Total = int(total)
	return page, nil
}

// pageSQL is the SQL of one page of ListInScope.
type pageSQL struct {
	filter     string // the WHERE clause of q's filter, which the total counts
	page       string // filter's, with the page's cursor: the tasks of the page and those after it
	args       []any  // page's arguments, then the limit; filter's are the first filterArgs
	filterArgs int
	limit      string // the limit's placeholder: the page's size and one more, which tells a next page
}

// pageQuery is the SQL of the page of q that continues before the task numbered cursor (0: the first
// page).
func pageQuery(q store.ListQuery, cursor int64) pageSQL {
	var l pageSQL
	var where []string
	add := func(cond string, arg any) {
		l.args = append(l.args, arg)
		where = append(where, strings.Replace(cond, "?", "$"+strconv.Itoa(len(l.args)), 1))
	}
	if q.Caller != "" {
		add("caller = ?", q.Caller)
	}
	if q.ContextID != "" {
		add("context_id = ?", q.ContextID)
	}
	if q.State != "" {
		add("state = ?", string(q.State))
	}
	if !q.After.IsZero() {
		// Stored timestamps are whole milliseconds, so "after q.After" is "after its millisecond".
		add("status_ts > ?", q.After.UnixMilli())
	}
	if len(where) > 0 {
		l.filter = " WHERE " + strings.Join(where, " AND ")
	}
	l.filterArgs = len(l.args)
	if cursor != 0 {
		add("seq < ?", cursor)
	}
	if len(where) > 0 {
		l.page = " WHERE " + strings.Join(where, " AND ")
	}
	l.args = append(l.args, q.PageSize+1)
	l.limit = "$" + strconv.Itoa(len(l.args))
	return l
}

// readPage reads, in tx, the page of tasks l selects, newest first, and its next page token when more
// follow (one row beyond the page tells).
func (s *Store) readPage(ctx context.Context, tx pgx.Tx, l pageSQL, q store.ListQuery) (store.ListPage, error) {
	rows, err := tx.Query(ctx, `SELECT seq, id, task FROM tasks`+l.page+` ORDER BY seq DESC LIMIT `+l.limit, l.args...)
	if err != nil {
		return store.ListPage{}, s.fail("listing tasks", retryRead, err)
	}
	defer rows.Close()
	tasks, last, more, err := store.ReadPage(rows, q.PageSize, func(err error) error { return s.fail("listing tasks", retryRead, err) })
	if err != nil {
		return store.ListPage{}, err
	}
	rows.Close()
	page := store.ListPage{Tasks: tasks}
	if more {
		page.NextPageToken = store.PageToken(last, q)
	}
	return page, nil
}

// loadMessages reads every (caller, message id) pair of the database's tasks into add (store.MessageFilter).
func (s *Store) loadMessages(ctx context.Context, add func(caller, messageID string)) error {
	rows, err := s.pool.Query(ctx, `SELECT caller, message_id FROM tasks WHERE message_id <> ''`)
	if err != nil {
		return err
	}
	defer rows.Close()
	return store.ReadMessages(rows, add)
}
