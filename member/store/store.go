package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	path    string // the file, absolute
	write   *sql.DB
	read    *sql.DB
	created bool // OpenWith wrote the file: an empty store at the newest schema
	// messages filters GetByMessage's lookups: a message no stored task came from is not queried.
	messages *MessageFilter
	now      func() time.Time
	log      *slog.Logger

	wmu   sync.Mutex // held across each write and its cache update, so the cache follows commit order
	cache *taskCache

	// The group commit (groupcommit.go): Create and Update hand rows to the committer through writes.
	writes        chan *pendingWrite
	committerDone chan struct{} // closed once the committer has returned
	stopCommits   chan struct{} // closed by Close, after the batch writer and the sweeper have stopped
	insertStmt    lazyStmt
	updateStmt    lazyStmt
	getStmt       lazyStmt // on the read pool
	soonMu        sync.Mutex
	soon          []*pendingWrite    // the rows handSoon took, for the committer's next group
	soonAt        map[a2a.TaskID]int // the index in soon of each task's row, which a later write of the task replaces
	soonKick      chan struct{}      // capacity 1: soon is not empty
	writeSeq      atomic.Int64       // numbers the rows handed to the committer, in the order they are handed
	batched       atomic.Bool        // CreateBatched has taken a task
	pending       Pending            // UpdateSoon's changes until they are committed: Get shows them at once
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
	closed    atomic.Bool    // Close was called: Ping fails, as a read of the closed pool would
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
	created, err := createFile(abs)
	if err != nil {
		return nil, fmt.Errorf("member: task store: %w", err)
	}
	write, err := openDB(abs, "_txlock=immediate")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	// A file createFile wrote is at the newest schema: its writer connects at the first write, so that
	// a store nobody writes to holds one connection (the reader's, which Ping uses), not two.
	if !created {
		if err := migrate(write); err != nil {
			_ = write.Close() // already failing: the error returned says what went wrong
			return nil, fmt.Errorf("member: task store %s: %w", abs, err)
		}
	}
	read, err := openDB(abs, "_query_only=1")
	if err != nil {
		_ = write.Close() // already failing: the error returned says what went wrong
		return nil, err
	}
	// A new file's reader connects at its first read too (a GetTask, a list, a retried message's
	// lookup): until then the store holds no SQLite connection, no -wal and -shm file, and Ping reads
	// the file's header. A file that was there is read at once, so that one that is not a store is
	// refused here.
	if !created {
		if err := read.Ping(); err != nil {
			_ = write.Close() // already failing: the error returned says what went wrong
			_ = read.Close()  // already failing: the error returned says what went wrong
			return nil, fmt.Errorf("member: task store %s: %w", abs, err)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path: abs, write: write, read: read, created: created, messages: NewMessageFilter(created), now: cfg.Now, log: cfg.Logger, cache: newTaskCache(cachedTasks, cachedBytes),
		batch:     newBatcher(),
		retention: cfg.Retention.Or(roster.DefaultRetention), removed: cfg.Removed,
		sweepKick: make(chan struct{}, 1),
		writes:    make(chan *pendingWrite), committerDone: make(chan struct{}), stopCommits: make(chan struct{}),
		soonKick:   make(chan struct{}, 1),
		insertStmt: lazyStmt{db: write, text: insertSQL}, updateStmt: lazyStmt{db: write, text: updateSQL},
		getStmt: lazyStmt{db: read, text: getSQL},
	}
	go s.committer(s.stopCommits)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.bg.Go(func() { s.writeBatches(ctx) })
	s.bg.Go(func() { s.sweepLoop(ctx) })
	return s, nil
}

// Close stops the background goroutines, after the batch writer has written every task handed to
// CreateBatched, and closes the store. Methods called after Close fail; CreateBatched keeps nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.batch.close()
		s.stop()
		s.bg.Wait()
		close(s.stopCommits)
		<-s.committerDone
	})
	return errors.Join(s.closeStatements(), s.read.Close(), s.write.Close())
}

// Ping reports whether the store's file can be read: through the reader's connection once it has one,
// and before that (a new store nothing has read yet, most of a large formation's when its doors first
// answer /readyz) by reading the file's header from the disk, which is what that connection would read
// first. Asking SQLite would connect the reader for every member that is only asked whether it is
// ready: its memory (about 100 KB), its -wal and -shm files, and a third of a new member's start.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return errors.New("member: task store: closed")
	}
	if s.read.Stats().OpenConnections == 0 {
		if err := checkHeader(s.path); err != nil {
			return fmt.Errorf("member: task store: %w", err)
		}
		return nil
	}
	var version int
	if err := s.read.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("member: task store: %w", err)
	}
	return nil
}

// Create stores a new task. Its id must be new to the store. It returns once the task is durable,
// committed with the other writes waiting at the same moment (see commit).
func (s *Store) Create(ctx context.Context, t *a2a.Task) error {
	w, err := s.createRow(ctx, t)
	if err != nil {
		return err
	}
	return s.commit(ctx, w)
}

// createRow is the row that creates t, its message added to the filter: GetByMessage must never miss
// it once the row can be committed.
func (s *Store) createRow(ctx context.Context, t *a2a.Task) (*pendingWrite, error) {
	if t.ID == "" {
		return nil, errors.New("member: storing a task without an id")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("member: storing task %s: %w", t.ID, err)
	}
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("member: storing task %s: %w", t.ID, err)
	}
	created := s.now()
	if ts := t.Status.Timestamp; ts != nil {
		created = ts.Time
	}
	w := &pendingWrite{op: opCreate, id: t.ID, context: t.ContextID, state: string(t.Status.State),
		ts: statusMillis(t), created: created, caller: taskCaller(t), body: body, message: FirstMessageID(t),
		trace: conv.Traceparent(ctx)}
	s.messages.Add(w.caller, w.message)
	return w, nil
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
	get, err := s.getStmt.get(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("member: reading task %s: %w", id, err)
	}
	err = get.QueryRowContext(ctx, string(id)).Scan(&body, &caller)
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
	if ok, err := s.messages.MayHold(ctx, caller, messageID, s.loadMessages); err != nil || !ok {
		if err == nil {
			err = notfound.Task("")
		}
		return nil, err
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
