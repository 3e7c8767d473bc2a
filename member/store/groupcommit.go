package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// Group commit. Create and Update do not each take the write lock and pay an fsync: they hand their row
// to the committer, one goroutine that takes every write waiting at that moment, runs them in one
// transaction through statements prepared once, and commits it with synchronous=FULL: one fsync for
// the lot. Each caller returns once the transaction holding its row is durable, with its own row's
// error (a duplicate id, a task no longer stored): a row that fails leaves the others of its group
// alone. While one group commits, the next one gathers, so concurrent writers (the Sends of many
// clients, the executor's state changes, several tasks ending at once) share fsyncs instead of
// queueing for one each.

// maxGroup bounds the rows of one group commit, so that a transaction stays short and the first
// writers of a burst are not kept waiting for the last.
const maxGroup = 256

// The kinds of write a group holds; the write hook is told of each kind's rows per group.
const (
	opCreate = "create"
	opUpdate = "update"
	opSettle = "settle" // no row: Settle's marker, answered once every write handed over before it is committed
	opPause  = "pause"  // no row: a test's (PauseCommitter), which holds the committer until its done is closed
)

// pendingWrite is one row handed to the committer.
type pendingWrite struct {
	op      string
	id      a2a.TaskID
	message string // a create's: the id of the message that created the task (FirstMessageID)
	trace   string // a create's: the traceparent of the request that sent the task (conv.Traceparent)
	context string
	state   string
	ts      any // statusMillis
	created time.Time
	caller  string
	body    []byte
	done    chan error   // capacity 1: the row's outcome, once its group is durable; nil for UpdateSoon's
	also    []chan error // the done of the rows this one replaced (handSoon), answered with it
	seq     int64        // the order rows were handed over in (Store.writeSeq)
}

// The statements of the group commit, prepared once on the write connection, at the first write.
const (
	insertSQL = `INSERT INTO tasks (id, context_id, state, status_ts, created, caller, task, message_id, traceparent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// A task's context never changes once it is created: an update leaves context_id, and so its index,
	// alone.
	updateSQL = `UPDATE tasks SET state = ?, status_ts = ?, task = ? WHERE id = ?`
)

// updateRow is the row of an update of t.
func updateRow(t *a2a.Task) (*pendingWrite, error) {
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("member: storing task %s: %w", t.ID, err)
	}
	return &pendingWrite{op: opUpdate, id: t.ID, context: t.ContextID, state: string(t.Status.State),
		ts: statusMillis(t), caller: taskCaller(t), body: body}, nil
}

// commit hands w to the committer and waits until the group holding it is durable. It does not give up
// when ctx ends once w is handed over: the row may be committed all the same, and its caller must know.
func (s *Store) commit(ctx context.Context, w *pendingWrite) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("member: storing task %s: %w", w.id, err)
	}
	w.done = make(chan error, 1)
	// A row of the task not yet taken stays before this one: no later write may replace it and so move
	// its content past this one.
	s.soonMu.Lock()
	w.seq = s.writeSeq.Add(1)
	delete(s.soonAt, w.id)
	s.soonMu.Unlock()
	s.fg.begin()
	defer s.fg.end()
	// s.writes is unbuffered: a row handed over is one the committer holds, and answers.
	select {
	case s.writes <- w:
	case <-s.committerDone:
		return fmt.Errorf("member: storing task %s: the task store is closed", w.id)
	}
	return <-w.done
}

// committer runs from OpenWith until Close ends stop, writing one group at a time.
func (s *Store) committer(stop <-chan struct{}) {
	defer close(s.committerDone)
	group := make([]*pendingWrite, 0, maxGroup)
	for {
		var first *pendingWrite
		select {
		case first = <-s.writes:
			if first.op == opPause {
				for range first.done { // closed by the test's resume; nothing is sent on it
				}
				continue
			}
		case <-s.soonKick:
		case <-stop:
			s.wmu.Lock()
			s.flushSoonLocked()
			s.wmu.Unlock()
			return
		}
		group = group[:0]
		if first != nil {
			group = append(group, first)
		}
		// The lock first: whatever arrives while another write holds it joins this group.
		s.wmu.Lock()
	gather:
		for len(group) < maxGroup {
			select {
			case w := <-s.writes:
				group = append(group, w)
			default:
				break gather
			}
		}
		// UpdateSoon's rows join the group after the gathering, so that one handed over before a row taken
		// from the channel is in it; the group is then put in the order the rows were handed over, so a
		// task's writes are committed in the order its goroutine made them.
		group = append(group, s.takeSoon()...)
		slices.SortFunc(group, func(a, b *pendingWrite) int { return cmp.Compare(a.seq, b.seq) })
		if len(group) == 0 {
			s.wmu.Unlock()
			continue
		}
		errs := s.applyGroup(group)
		s.wmu.Unlock()
		s.answer(group, errs)
	}
}

// answer tells each row of a committed group its outcome: its waiter, or the log for UpdateSoon's rows.
func (s *Store) answer(group []*pendingWrite, errs []error) {
	for i, w := range group {
		for _, c := range w.also {
			c <- errs[i]
		}
		switch {
		case w.done != nil:
			w.done <- errs[i]
		case errs[i] != nil && len(w.also) == 0:
			s.log.Error("the task store could not store a task's progress", "task", w.id, "err", errs[i])
		}
	}
}

// applyGroup writes group in one transaction and puts what it stored in the cache. wmu is held.
func (s *Store) applyGroup(group []*pendingWrite) []error {
	errs := s.writeGroup(group)
	for i, w := range group {
		if w.op == opSettle {
			continue
		}
		if errs[i] == nil {
			s.cache.put(w.id, w.caller, w.body)
		}
		s.pending.Settled(w.id, w.seq)
	}
	return errs
}

// writeGroup writes group in one transaction and returns each row's error. wmu is held.
func (s *Store) writeGroup(group []*pendingWrite) []error {
	errs := make([]error, len(group))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = fmt.Errorf("member: storing task %s: %w", group[i].id, err)
		}
		return errs
	}
	ctx := context.Background()
	// Prepared before the transaction takes the write pool's one connection, which preparing needs.
	insertStmt, err := s.insertStmt.get(ctx)
	if err != nil {
		return fail(err)
	}
	updateStmt, err := s.updateStmt.get(ctx)
	if err != nil {
		return fail(err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	insert, update := tx.StmtContext(ctx, insertStmt), tx.StmtContext(ctx, updateStmt)
	created, updated := 0, 0
	for i, w := range group {
		switch w.op {
		case opCreate:
			if _, err := insert.ExecContext(ctx, string(w.id), w.context, w.state, w.ts, w.created.UnixMilli(), w.caller, w.body, w.message, w.trace); err != nil {
				errs[i] = fmt.Errorf("member: storing task %s: %w", w.id, err)
				continue
			}
			created++
		case opUpdate:
			res, err := update.ExecContext(ctx, w.state, w.ts, w.body, string(w.id))
			if err == nil {
				var n int64
				if n, err = res.RowsAffected(); err == nil && n == 0 {
					errs[i] = notfound.Task(w.id)
					continue
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("member: storing task %s: %w", w.id, err)
				continue
			}
			updated++
		}
	}
	if created > 0 {
		s.hook(opCreate, created)
	}
	if updated > 0 {
		s.hook(opUpdate, updated)
	}
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		return fail(err)
	}
	s.arrived(created)
	return errs
}

// closeStatements closes the statements the store prepared.
func (s *Store) closeStatements() error {
	return errors.Join(s.insertStmt.close(), s.updateStmt.close(), s.getStmt.close())
}

// UpdateAll stores every task of ts as Update does, all in one transaction (one fsync however many they
// are: a shutdown cancelling thousands of queued tasks), and returns each task's error in order.
func (s *Store) UpdateAll(ctx context.Context, ts []*a2a.Task) []error {
	errs := make([]error, len(ts))
	writes := make([]*pendingWrite, len(ts))
	for i, t := range ts {
		if writes[i], errs[i] = updateRow(t); writes[i] != nil {
			writes[i].seq = s.writeSeq.Add(1)
		}
	}
	var group []*pendingWrite
	var at []int
	for i, w := range writes {
		if w != nil {
			group, at = append(group, w), append(at, i)
		}
	}
	if len(group) == 0 {
		return errs
	}
	s.fg.begin()
	defer s.fg.end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.flushSoonLocked()
	for j, err := range s.applyGroup(group) {
		errs[at[j]] = err
	}
	return errs
}

// UpdateSoon stores t as Update does, with the committer's next group, and returns without waiting for
// it: for a change that need not be durable before it is visible, such as a task starting to work (a
// crash before its commit leaves the task submitted, which the restart ends failed all the same). Get
// shows the change at once (Pending); an Update or Create that follows is committed after it. A failure
// is logged.
func (s *Store) UpdateSoon(t *a2a.Task) {
	w, err := updateRow(t)
	if err != nil {
		s.log.Error("the task store could not store a task's progress", "task", t.ID, "err", err)
		return
	}
	s.handSoon(w, true)
}

// handSoon appends w, numbered in the order of all writes, to the committer's next group, and wakes the
// committer. With show, reads show w from now on (Pending). A row of the same task that the committer has
// not taken yet is replaced by w, which writes the whole row: a task that ends before its working state
// was written has one row written, its end, not two, and one created by CreateLater that ends before its
// creation was written has one row inserted, its end (w keeps the creation's columns). Whoever waits for
// the replaced row is answered with w's outcome: what they wrote is in w (the group is put in the order of
// seq, so w keeps its place after the writes handed over before it).
func (s *Store) handSoon(w *pendingWrite, show bool) {
	s.soonMu.Lock()
	w.seq = s.writeSeq.Add(1)
	if show {
		s.pending.Put(w.id, w.seq, w.caller, w.body)
	} else if w.body != nil {
		s.pending.Supersede(w.id, w.seq, w.caller, w.body)
	}
	if i, ok := s.soonAt[w.id]; ok && w.op == opUpdate {
		w.takeOver(s.soon[i])
		s.soon[i] = w
	} else {
		if w.op != opSettle {
			if s.soonAt == nil {
				s.soonAt = map[a2a.TaskID]int{}
			}
			s.soonAt[w.id] = len(s.soon)
		}
		s.soon = append(s.soon, w)
	}
	s.soonMu.Unlock()
	select {
	case s.soonKick <- struct{}{}:
	default:
	}
}

// takeOver makes w, a later write of the same task, stand for old too: a creation's columns and old's
// waiters become w's.
func (w *pendingWrite) takeOver(old *pendingWrite) {
	if old.op == opCreate {
		w.op, w.message, w.trace, w.created = opCreate, old.message, old.trace, old.created
	}
	if old.done != nil {
		w.also = append(w.also, old.done)
	}
	w.also = append(w.also, old.also...)
}

// CreateLater stores a new task as Create does, handed to the committer's next group at once, and
// returns what waits until it is durable and reports Create's error: reads show the task from the
// moment it is handed over (Pending), so whoever runs it may start before its creation is durable,
// while its sender is answered only after. Writes of the task handed over before the committer takes
// the creation replace it in the same row: a task that ends first is inserted once, ended. The wait
// must be called once.
func (s *Store) CreateLater(ctx context.Context, t *a2a.Task) (wait func() error) {
	w, err := s.createRow(ctx, t)
	if err != nil {
		return func() error { return err }
	}
	return s.handLater(w, true)
}

// UpdateLater hands t to the committer's next group as UpdateSoon does, at once and without waiting for
// anything (not even for a group being committed), and returns what waits until t is durable and reports
// its error as Update would: for a caller that must not hold its own lock across the disk's wait, yet
// must hand over its write in the order of its other writes, and show the change only once it is
// durable (a task's end). Get shows the change once it is committed; an Update or Create handed over
// after it is committed after it. The wait must be called once.
func (s *Store) UpdateLater(ctx context.Context, t *a2a.Task) (wait func() error) {
	if err := ctx.Err(); err != nil {
		return func() error { return fmt.Errorf("member: storing task %s: %w", t.ID, err) }
	}
	w, err := updateRow(t)
	if err != nil {
		return func() error { return err }
	}
	return s.handLater(w, false)
}

// handLater hands w over as handSoon does and returns its wait, which returns w's outcome once its
// group is committed.
func (s *Store) handLater(w *pendingWrite, show bool) func() error {
	w.done = make(chan error, 1)
	s.fg.begin()
	s.handSoon(w, show)
	return func() error {
		defer s.fg.end()
		select {
		case err := <-w.done:
			return err
		case <-s.committerDone:
			// The committer answers what its last group held before it returns.
			select {
			case err := <-w.done:
				return err
			default:
				return fmt.Errorf("member: storing task %s: the task store is closed", w.id)
			}
		}
	}
}

// Settle returns once every write handed to the store before it, UpdateSoon's included, is committed:
// for a reader of the file that must not miss a change already published (the push notifier reading a
// task's status for a new config).
func (s *Store) Settle(ctx context.Context) error {
	return s.commit(ctx, &pendingWrite{op: opSettle})
}

// flushSoonLocked commits the rows handed over by handSoon that the committer has not taken, and
// answers them: for a write outside the committer (UpdateAll, EndAll) that must find a task created by
// CreateLater, and come after its writes. wmu is held.
func (s *Store) flushSoonLocked() {
	if rows := s.takeSoon(); len(rows) > 0 {
		s.answer(rows, s.applyGroup(rows))
	}
}

// takeSoon takes the rows handSoon holds, oldest first.
func (s *Store) takeSoon() []*pendingWrite {
	s.soonMu.Lock()
	defer s.soonMu.Unlock()
	rows := s.soon
	s.soon = nil
	clear(s.soonAt)
	return rows
}

// GetAll returns the stored tasks of ids, in the order of ids, leaving out those the store does not
// hold: the tasks the cache holds are taken from it and the others read in one query per thousand, so
// that a shutdown reads thousands of queued tasks at the cost of a few statements, not one each. A task
// that cannot be decoded is left out and its error returned with the others.
func (s *Store) GetAll(ctx context.Context, ids []a2a.TaskID) ([]*a2a.Task, error) {
	bodies := make(map[a2a.TaskID][]byte, len(ids))
	var missing []string
	for _, id := range ids {
		if body, _, ok := s.pending.Get(id); ok {
			bodies[id] = body
		} else if body, _, ok := s.cache.get(id); ok {
			bodies[id] = body
		} else if p, ok := s.batch.get(id); ok {
			bodies[id] = p.body
		} else {
			missing = append(missing, string(id))
		}
	}
	const chunk = 1000
	for len(missing) > 0 {
		n := min(chunk, len(missing))
		if err := s.readInto(ctx, missing[:n], bodies); err != nil {
			return nil, err
		}
		missing = missing[n:]
	}
	ts := make([]*a2a.Task, 0, len(ids))
	var errs []error
	for _, id := range ids {
		body, ok := bodies[id]
		if !ok {
			continue
		}
		t, err := Decode(id, body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts = append(ts, t)
	}
	return ts, errors.Join(errs...)
}

// readInto reads the tasks of ids in one query into bodies.
func (s *Store) readInto(ctx context.Context, ids []string, bodies map[a2a.TaskID][]byte) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("member: reading tasks: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT id, task FROM tasks WHERE id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return fmt.Errorf("member: reading tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return fmt.Errorf("member: reading tasks: %w", err)
		}
		bodies[a2a.TaskID(id)] = body
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("member: reading tasks: %w", err)
	}
	return nil
}
