package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
	"github.com/murmur-run/murmur/roster"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// RestartMessage is the status message of a task that was running when its member stopped and that
// Recover ended failed.
const RestartMessage = "member restarted: the task was interrupted and did not finish"

// Store is a member's durable task store: one SQLite file, in WAL mode with synchronous=FULL, so a
// write is on disk when its method returns and a task the door acknowledged survives a crash.
//
// A Store is safe for concurrent use. Writes go through one connection, in call order, because
// SQLite admits one writer at a time and queueing in database/sql is cheaper and fairer than
// SQLite's busy handler; reads use a pool of their own and run beside the writer (WAL). Two
// goroutines write in the background, without an fsync of their own and giving way to the writes
// someone waits for: the batch writer of CreateBatched, and the retention sweeper (Sweep). Close
// stops both.
type Store struct {
	write *sql.DB
	read  *sql.DB
	now   func() time.Time
	log   *slog.Logger

	wmu   sync.Mutex // held across each write and its cache update, so the cache follows commit order
	cache *taskCache

	// The group commit (groupcommit.go): Create and Update hand rows to the committer through writes.
	writes        chan *pendingWrite
	committerDone chan struct{} // closed once the committer has returned
	stopCommits   chan struct{} // closed by Close, after the batch writer and the sweeper have stopped
	insertStmt    *sql.Stmt
	updateStmt    *sql.Stmt
	getStmt       *sql.Stmt // on the read pool
	soonMu        sync.Mutex
	soon          []*pendingWrite // UpdateSoon's rows, for the committer's next group
	soonKick      chan struct{}   // capacity 1: soon is not empty
	writeSeq      atomic.Int64    // numbers the rows handed to the committer, in the order they are handed
	pending       Pending         // UpdateSoon's changes until they are committed: Get shows them at once
	// writing, when set (tests), is called with wmu held before each write transaction commits, with
	// what it is ("create", "update", "recover", "batch", "sweep") and the rows it writes or removes.
	writing func(op string, rows int)

	fg        foreground // the writes someone waits for; background writes give way to them
	batch     batcher    // tasks handed to CreateBatched, waiting for the batch writer
	retention roster.Retention
	removed   func(ids []a2a.TaskID) // Config.Removed
	arrivals  atomic.Int64           // tasks stored since the last sweep began
	sweepKick chan struct{}          // wakes the sweeper early; capacity 1

	stop      context.CancelFunc // ends the background goroutines: the batch writer drains and returns
	closeOnce sync.Once
	bg        sync.WaitGroup // the batch writer and the sweeper
}

// Config is what a store is given beyond its path. The zero value is valid.
type Config struct {
	// Retention says which ended tasks the store keeps; its zero fields take roster.DefaultRetention's.
	Retention roster.Retention
	// Now is the clock of task ages and creation times; nil means time.Now.
	Now func() time.Time
	// Logger receives what the background writer and sweeper cannot return to anyone; nil discards it.
	Logger *slog.Logger
	// Removed, when set, is told the ids of the tasks each sweep removed, once they are gone from the
	// file, with no lock of the store held: what is kept beside the store for them (the files of their
	// artifacts) goes with them.
	Removed func(ids []a2a.TaskID)
}

// cachedTasks and cachedBytes bound the tasks whose JSON the store keeps in memory, in number and in
// bytes: tasks are small as a rule, but one may hold a message of a megabyte and a long answer.
const (
	cachedTasks = 4096
	cachedBytes = 64 << 20
)

// maxPageBytes bounds the stored JSON of the tasks of one ListTasks page: a page that reaches it ends
// early, with a next page token.
const maxPageBytes = 4 << 20

// schema holds the store's migrations: schema[i] takes user_version i to i+1. Append, never edit.
var schema = []string{
	`CREATE TABLE tasks (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         TEXT    NOT NULL UNIQUE,
		context_id TEXT    NOT NULL,
		state      TEXT    NOT NULL,
		status_ts  INTEGER,          -- unix ms; NULL when the status has no timestamp
		created    INTEGER NOT NULL, -- unix ms
		task       TEXT    NOT NULL  -- the whole a2a.Task as JSON
	);
	CREATE INDEX tasks_context ON tasks (context_id, seq);
	CREATE INDEX tasks_state ON tasks (state, seq);`,
	// caller: the member that sent the task ('' for the operator's). Tasks stored before it had no caller
	// recorded: a peer's get '?', which no member is called, so they stay the operator's to see.
	`ALTER TABLE tasks ADD COLUMN caller TEXT NOT NULL DEFAULT '';
	UPDATE tasks SET caller = '?' WHERE json_extract(task, '$.metadata.murmur.origin') = 'peer';
	CREATE INDEX tasks_caller ON tasks (caller, seq);`,
	// Retention finds ended tasks by their last status time.
	`CREATE INDEX tasks_ended ON tasks (state, status_ts);`,
	// ListTasks's totalSize without counting the table: the tasks of each state and caller, kept by
	// triggers in the transaction that changes them.
	`CREATE TABLE task_counts (
		state  TEXT    NOT NULL,
		caller TEXT    NOT NULL,
		n      INTEGER NOT NULL,
		PRIMARY KEY (state, caller)
	) WITHOUT ROWID;
	INSERT INTO task_counts (state, caller, n) SELECT state, caller, count(*) FROM tasks GROUP BY state, caller;
	CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
		INSERT INTO task_counts (state, caller, n) VALUES (NEW.state, NEW.caller, 1)
			ON CONFLICT (state, caller) DO UPDATE SET n = n + 1;
	END;
	CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
		UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND caller = OLD.caller;
	END;
	CREATE TRIGGER task_counts_update AFTER UPDATE OF state, caller ON tasks
		WHEN OLD.state IS NOT NEW.state OR OLD.caller IS NOT NEW.caller BEGIN
		UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND caller = OLD.caller;
		INSERT INTO task_counts (state, caller, n) VALUES (NEW.state, NEW.caller, 1)
			ON CONFLICT (state, caller) DO UPDATE SET n = n + 1;
	END;`,
	// message_id: the id of the message that created the task, so a SendMessage retried with the same
	// messageId finds the task it created (GetByMessage). Tasks stored before it have none.
	`ALTER TABLE tasks ADD COLUMN message_id TEXT NOT NULL DEFAULT '';
	CREATE INDEX tasks_message ON tasks (caller, message_id) WHERE message_id != '';`,
	// traceparent: the W3C traceparent of the request that sent the task ('' when it carried none), in
	// whose trace its push notifications are posted (DESIGN §17).
	`ALTER TABLE tasks ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';`,
}

// Open opens the task store at path with the default Config; see OpenWith.
func Open(path string) (*Store, error) {
	return OpenWith(path, Config{})
}

// OpenWith opens the task store at path, creating the file (mode 0600), its parent directory
// (mode 0700) and the schema as needed, and starts its batch writer and its retention sweeper, which
// Close stops. A store written by a newer program is refused.
func OpenWith(path string, cfg Config) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("member: task store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("member: task store: %w", err)
	}
	// SQLite would create the file with the umask's mode; create it first so it is the owner's
	// alone. SQLite gives the -wal and -shm files the mode of the database file.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("member: task store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("member: task store: %w", err)
	}

	write, err := openDB(abs, "_txlock=immediate")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	if err := migrate(write); err != nil {
		_ = write.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("member: task store %s: %w", abs, err)
	}
	read, err := openDB(abs, "_query_only=1")
	if err != nil {
		_ = write.Close() // already failing: the error returned says what went wrong
		return nil, err
	}
	if err := read.Ping(); err != nil {
		write.Close()
		_ = read.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("member: task store %s: %w", abs, err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		write: write, read: read, now: cfg.Now, log: cfg.Logger, cache: newTaskCache(cachedTasks, cachedBytes),
		batch:     newBatcher(),
		retention: cfg.Retention.Or(roster.DefaultRetention), removed: cfg.Removed,
		sweepKick: make(chan struct{}, 1),
		writes:    make(chan *pendingWrite), committerDone: make(chan struct{}), stopCommits: make(chan struct{}),
		soonKick: make(chan struct{}, 1),
	}
	if err := s.prepareWrites(); err != nil {
		s.closeStatements()
		write.Close()
		_ = read.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("member: task store %s: %w", abs, err)
	}
	go s.committer(s.stopCommits)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.bg.Go(func() { s.writeBatches(ctx) })
	s.bg.Go(func() { s.sweepLoop(ctx) })
	return s, nil
}

// openDB opens a pool on the file at abs whose every connection gets the store's pragmas.
func openDB(abs, extra string) (*sql.DB, error) {
	q := url.Values{}
	// journal_size_limit: once a checkpoint has emptied the write-ahead log, the next write truncates it
	// to this size, so the log shrinks back after a burst (a flood of rejections, a large sweep).
	// temp_store(MEMORY): an UPDATE of an indexed column inside a transaction keeps a statement journal,
	// which SQLite otherwise writes to a temporary file, page by page: a shutdown's one transaction of
	// 20,000 cancels spent most of its time in those writes. cache_size (KiB when negative): a page cache
	// of 32 MiB at most, so such a transaction does not read back the pages it has just written.
	for _, p := range []string{"busy_timeout(5000)", "temp_store(MEMORY)", "cache_size(-32768)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(ON)",
		"journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")"} {
		q.Add("_pragma", p)
	}
	// A file: URI, so that a '?' or '#' in the path is escaped rather than read as the query.
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String() + "?" + q.Encode() + "&" + extra
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("member: task store %s: %w", abs, err)
	}
	return db, nil
}

// migrate brings the schema to the newest version, in one transaction.
func migrate(db *sql.DB) (err error) {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var version int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(schema) {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, len(schema))
	}
	if version == len(schema) {
		return tx.Rollback()
	}
	for _, step := range schema[version:] {
		if _, err := tx.Exec(step); err != nil {
			return fmt.Errorf("schema version %d: %w", version+1, err)
		}
		version++
	}
	if _, err := tx.Exec(`PRAGMA user_version = ` + strconv.Itoa(version)); err != nil {
		return err
	}
	return tx.Commit()
}

// walSizeLimit is the journal_size_limit: the size, in bytes, the write-ahead log is cut back to.
const walSizeLimit = 4 << 20

// Close stops the background goroutines, after the batch writer has written every task handed to
// CreateBatched, and closes the store. Methods called after Close fail; CreateBatched keeps nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.batch.close()
		s.stop()
		s.bg.Wait()
		close(s.stopCommits)
		<-s.committerDone
	})
	return errors.Join(s.closeStatements(), s.read.Close(), s.write.Close())
}

// Ping reports whether the store's file can be read.
func (s *Store) Ping(ctx context.Context) error {
	var version int
	if err := s.read.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	return nil
}

// Create stores a new task. Its id must be new to the store. It returns once the task is durable,
// committed with the other writes waiting at the same moment (see commit).
func (s *Store) Create(ctx context.Context, t *a2a.Task) error {
	if t.ID == "" {
		return errors.New("member: storing a task without an id")
	}
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("member: storing task %s: %w", t.ID, err)
	}
	created := s.now()
	if ts := t.Status.Timestamp; ts != nil {
		created = ts.Time
	}
	return s.commit(ctx, &pendingWrite{op: opCreate, id: t.ID, context: t.ContextID, state: string(t.Status.State),
		ts: statusMillis(t), created: created, caller: taskCaller(t), body: body, message: FirstMessageID(t),
		trace: conv.Traceparent(ctx)})
}

// taskCaller is the member that sent t, from its metadata (murmur.caller); "" for the operator's tasks.
// It is set once, when the task is created, and never changes.
func taskCaller(t *a2a.Task) string {
	c, _ := ids.Get(ids.Murmur(t.Metadata), ids.MetaCaller).(string)
	return c
}

// execer is what insertTask writes through: the write pool, or a transaction of it.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertTask is the INSERT of a task row outside the group commit: the batch writer's.
func insertTask(ctx context.Context, db execer, t *a2a.Task, body []byte, created time.Time) error {
	_, err := db.ExecContext(ctx, insertSQL, string(t.ID), t.ContextID, string(t.Status.State), statusMillis(t), created.UnixMilli(), taskCaller(t), body, FirstMessageID(t), "")
	if err != nil {
		return fmt.Errorf("member: storing task %s: %w", t.ID, err)
	}
	return nil
}

// hook calls the test's write hook, if any. wmu is held.
func (s *Store) hook(op string, rows int) {
	if s.writing != nil {
		s.writing(op, rows)
	}
}

// Update replaces the stored task whose id is t's with t. The error wraps ErrNotFound (and so
// a2a.ErrTaskNotFound) when the store has no such task.
func (s *Store) Update(ctx context.Context, t *a2a.Task) error {
	w, err := updateRow(t)
	if err != nil {
		return err
	}
	return s.commit(ctx, w)
}

// Get returns the stored task with the given id, a copy the caller may change. The error wraps
// ErrNotFound (and so a2a.ErrTaskNotFound) when the store has no such task.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	body, err := s.getJSON(ctx, id)
	if err != nil {
		return nil, err
	}
	return Decode(id, body)
}

// getJSON returns the stored task's JSON, exactly as a2a.Task marshals. The caller must not modify it.
// The error wraps ErrNotFound (and so a2a.ErrTaskNotFound) when the store has no such task.
func (s *Store) getJSON(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	body, _, err := s.getWithCaller(ctx, id)
	return body, err
}

// getWithCaller returns the stored task's JSON and the member that sent it ("" for the operator). The
// caller must not modify the bytes. The error wraps ErrNotFound when the store has no such task.
func (s *Store) getWithCaller(ctx context.Context, id a2a.TaskID) (body []byte, caller string, err error) {
	if body, caller, ok := s.pending.Get(id); ok {
		return body, caller, nil
	}
	if body, caller, ok := s.cache.get(id); ok {
		return body, caller, nil
	}
	if p, ok := s.batch.get(id); ok {
		return p.body, p.caller, nil
	}
	mark := s.cache.mark()
	err = s.getStmt.QueryRowContext(ctx, string(id)).Scan(&body, &caller)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", notfound.Task(id)
	}
	if err != nil {
		return nil, "", fmt.Errorf("member: reading task %s: %w", id, err)
	}
	// The next read of it is the cache's (an old task polled again, a GetTask after many writes).
	s.cache.fill(id, caller, body, mark)
	return body, caller, nil
}

// getByMessageSQL finds the task of a caller's message. message_id != ” is the partial index's own
// condition: without it SQLite does not use the index (it does not infer it from message_id = ?), and
// every SendMessage read the whole table (TestGetByMessageUsesItsIndex).
const getByMessageSQL = `SELECT id FROM tasks WHERE caller = ? AND message_id = ? AND message_id != '' AND state != ? ORDER BY seq DESC LIMIT 1`

// GetByMessage returns the newest stored task that the message messageID of caller ("" for the
// operator) created and that was not rejected: what a retried SendMessage answers. The error wraps
// ErrNotFound when there is none.
func (s *Store) GetByMessage(ctx context.Context, caller, messageID string) (*a2a.Task, error) {
	if messageID == "" {
		return nil, notfound.Task("")
	}
	var id string
	err := s.read.QueryRowContext(ctx, getByMessageSQL,
		caller, messageID, string(a2a.TaskStateRejected)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notfound.Task("")
	}
	if err != nil {
		return nil, fmt.Errorf("member: looking up message %s: %w", messageID, err)
	}
	return s.Get(ctx, a2a.TaskID(id))
}

// ListQuery selects the tasks of ListTasks. Zero fields do not filter.
type ListQuery struct {
	// Caller, when set, keeps only the tasks that member sent (a peer's ListTasks).
	Caller    string
	ContextID string
	State     a2a.TaskState
	After     time.Time // status timestamp strictly after; zero: any
	PageSize  int       // 1..a2a.MaxPageSize, validated by the caller
	PageToken string    // "" for the first page
}

// ListPage is one page of tasks, newest first.
type ListPage struct {
	Tasks         []*a2a.Task
	NextPageToken string // "" on the last page
	Total         int    // the tasks matching the query, on all pages
}

// list returns one page of the tasks that match q, newest first. A page token that is not one of the
// store's, or that was issued for a different filter, is refused with an error wrapping
// a2a.ErrInvalidParams.
func (s *Store) list(ctx context.Context, q ListQuery) (ListPage, error) {
	digest := q.digest()
	var where []string
	var args []any
	if q.Caller != "" {
		where, args = append(where, "caller = ?"), append(args, q.Caller)
	}
	if q.ContextID != "" {
		where, args = append(where, "context_id = ?"), append(args, q.ContextID)
	}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if !q.After.IsZero() {
		// Stored timestamps are whole milliseconds, so "after q.After" is "after its millisecond".
		where, args = append(where, "status_ts > ?"), append(args, q.After.UnixMilli())
	}
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	pageWhere, pageArgs := where, args
	if q.PageToken != "" {
		cursor, err := decodePageToken(q.PageToken, digest)
		if err != nil {
			return ListPage{}, err
		}
		pageWhere, pageArgs = append(slices.Clip(where), "seq < ?"), append(slices.Clip(args), cursor)
	}
	pageFilter := ""
	if len(pageWhere) > 0 {
		pageFilter = " WHERE " + strings.Join(pageWhere, " AND ")
	}

	// One read transaction, so the total and the page come from the same snapshot.
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	defer tx.Rollback()
	var page ListPage
	count := `SELECT count(*) FROM tasks` + filter
	switch {
	case q.ContextID == "" && q.After.IsZero():
		// Filtered by state and caller at most: task_counts holds the answer.
		count = `SELECT coalesce(sum(n), 0) FROM task_counts` + filter
	case q.ContextID == "" && q.State == "":
		// After a time, in any state: counted in tasks_ended (state, status_ts), a range of it for each
		// state there is, rather than the whole table. (A context is counted in its own index.)
		count += ` AND state IN (SELECT state FROM task_counts)`
	}
	if err := tx.QueryRowContext(ctx, count, args...).Scan(&page.Total); err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	// One row beyond the page tells whether there is a next page.
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, task FROM tasks`+pageFilter+` ORDER BY seq DESC LIMIT ?`,
		append(pageArgs, q.PageSize+1)...)
	if err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	defer rows.Close()
	var last int64
	more := false
	size := 0
	for rows.Next() {
		// A page ends at its size, or once it holds maxPageBytes of tasks, so a response stays bounded
		// however large the tasks are; the next page starts after the last task sent.
		if len(page.Tasks) == q.PageSize || size >= maxPageBytes {
			more = true
			break
		}
		var id string
		var body []byte
		if err := rows.Scan(&last, &id, &body); err != nil {
			return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
		}
		t, err := Decode(a2a.TaskID(id), body)
		if err != nil {
			return ListPage{}, err
		}
		size += len(body)
		page.Tasks = append(page.Tasks, t)
	}
	if err := rows.Err(); err != nil {
		return ListPage{}, fmt.Errorf("member: listing tasks: %w", err)
	}
	if more {
		page.NextPageToken = encodePageToken(last, digest)
	}
	return page, nil
}

// Recover ends failed, with RestartMessage and a status timestamp of now, every task that was not in a
// terminal state: the member stopped while it ran or waited, and nothing will finish it. It returns
// the ids of the tasks it changed, in creation order. Call it once, before the store takes new tasks.
func (s *Store) Recover(ctx context.Context, now time.Time) (changed []a2a.TaskID, err error) {
	s.fg.begin()
	defer s.fg.end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
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
	rows, err := tx.QueryContext(ctx, `SELECT id, task FROM tasks WHERE state IN (?, ?, ?, ?) ORDER BY seq`,
		string(a2a.TaskStateSubmitted), string(a2a.TaskStateWorking),
		string(a2a.TaskStateInputRequired), string(a2a.TaskStateAuthRequired))
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

// statusMillis returns t's status timestamp in unix milliseconds, or nil (NULL) when it has none.
func statusMillis(t *a2a.Task) any {
	if t.Status.Timestamp == nil {
		return nil
	}
	return t.Status.Timestamp.UnixMilli()
}

// Decode reads task id from body, its stored JSON: what both stores' reads share.
func Decode(id a2a.TaskID, body []byte) (*a2a.Task, error) {
	t := new(a2a.Task)
	if err := json.Unmarshal(body, t); err != nil {
		return nil, fmt.Errorf("member: reading task %s: %w", id, err)
	}
	return t, nil
}

// A page token is base64url of a version byte, the seq of the last task of its page and a digest of
// the filter it was issued for: opaque to clients, and refused with any other filter.
const (
	pageTokenVersion = 1
	pageTokenLen     = 1 + 8 + 8
)

// digest identifies q's filter (not its page size, which a client may change between pages).
func (q ListQuery) digest() [8]byte {
	after := ""
	if !q.After.IsZero() {
		after = strconv.FormatInt(q.After.UnixMilli(), 10)
	}
	sum := sha256.Sum256([]byte(q.ContextID + "\x00" + string(q.State) + "\x00" + after + "\x00" + q.Caller))
	return [8]byte(sum[:8])
}

func encodePageToken(seq int64, digest [8]byte) string {
	b := make([]byte, 0, pageTokenLen)
	b = append(b, pageTokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = append(b, digest[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(token string, digest [8]byte) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != pageTokenLen || b[0] != pageTokenVersion {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "not a page token this member issued",
		}))
	}
	if [8]byte(b[9:]) != digest {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "issued for a different filter; keep contextId, status and statusTimestampAfter",
		}))
	}
	seq := binary.BigEndian.Uint64(b[1:9])
	if seq == 0 || seq > 1<<63-1 {
		return 0, fmt.Errorf("member: listing tasks: %w", a2a.InvalidParams(a2a.FieldViolation{
			Field: "pageToken", Description: "not a page token this member issued",
		}))
	}
	return int64(seq), nil
}
