// Package postgres is a member's task store on PostgreSQL (DESIGN §16): the store.Tasks of the
// embedded SQLite store (package member/store), with the same behaviour, kept in a database that one
// process holds alone (Config.Replica ""), or that the replicas of one member share (a replica name:
// store.Replicated, replicas.go and watch.go). A database is one process's or its replicas', never
// both, and a replica name is one live process's: Open takes advisory locks that say so.
//
// Writes go through one writer goroutine that commits, in one transaction, every write waiting at that
// moment, in the order they were handed over (group commit), with synchronous_commit on: a write is
// durable when it returns. Reads use the pool beside it. A retention sweeper removes ended tasks by age
// and count. Close writes what it was handed, stops both goroutines and closes the pool.
//
// A member of one process keeps the JSON of its recent tasks in memory, as the SQLite store does
// (store.TaskCache), so that GetTask, the door's hottest call, is answered without a round trip to the
// server: the process holds its database alone (memberLock), so every change of a task is its own
// writer's or its sweeper's, each of which updates the cache once committed and before anyone is
// answered. Replicas keep no such cache: another replica changes their tasks.
//
// Imports: a2a, roster, internal/ids and member/store (the contract and its helpers); never member.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// Config is what a store is given beyond its address. The zero value is valid; its fields mean what
// store.Config's do.
type Config struct {
	// Retention says which ended tasks the store keeps; its zero fields take roster.DefaultRetention's.
	Retention roster.Retention
	// Now is the clock of task ages and creation times; nil means time.Now.
	Now func() time.Time
	// Logger receives what the writer and the sweeper cannot return to anyone; nil discards it.
	Logger *slog.Logger
	// Removed, when set, is told the ids of the tasks each sweep removed, once their removal is committed.
	Removed func(ids []a2a.TaskID)
	// Replica is this process's name among the replicas of its member that share the database (DESIGN
	// §16, store.Replicated), in store.ReplicaName's form; "" for a member of one process, which holds
	// the database alone. A replica owns the tasks it creates, writes only the tasks it owns, and
	// Recovers only its own name's.
	Replica string
}

// Store is a member's task store in a PostgreSQL database. It is safe for concurrent use.
type Store struct {
	pool      *pgxpool.Pool
	owner     *pgx.Conn // holds the database's member lock (memberLock) until Close
	replica   string    // Config.Replica
	where     string    // the database's host (and port), for errors: never the password
	now       func() time.Time
	log       *slog.Logger
	retention roster.Retention
	removed   func(ids []a2a.TaskID)
	cache     *store.TaskCache // a member of one process's; nil in a replica, which reads every task from the database
	// messages filters GetByMessage for a member of one process (nil in a replica: another replica
	// creates tasks too), so a message no task came from costs no round trip.
	messages *store.MessageFilter
	// cacheMu is held by the writer from a group's commit to its cache update, and by forget: the
	// cache follows the order in which the changes of a task were committed (a task the sweeper
	// removed is never put back by a write committed before the removal).
	cacheMu sync.Mutex

	renewMu sync.Mutex // serializes Renew
	renewed bool       // Renew wrote this process's lease once: from then on a missing row means reaped

	// The writer (writer.go).
	qmu     sync.Mutex
	queue   []*write      // handed over, not yet taken by the writer, in the order they were handed over
	handed  int64         // the writes handed over so far: numbers each write (write.seq)
	pending store.Pending // UpdateSoon's changes until they are committed: reads show them at once
	closed  bool          // Close began: nothing more is taken
	kick    chan struct{}
	drained chan struct{} // closed once the writer has written everything and returned

	batchedRows, batchedBytes atomic.Int64 // CreateBatched's tasks handed over and not yet committed

	// The sweeper (retention.go).
	arrivals  atomic.Int64
	sweepKick chan struct{}
	stopSweep context.CancelFunc
	sweeping  sync.WaitGroup

	closeOnce sync.Once
}

var _ store.Tasks = (*Store)(nil)

// Timeouts. A connection that cannot be opened within connectTimeout is reported unreachable; a group
// of writes that the database has not committed within groupTimeout fails (its outcome is then unknown:
// a write's caller is told it failed, never that it succeeded when it did not).
const (
	connectTimeout = 10 * time.Second
	groupTimeout   = time.Minute
)

// Open connects to the PostgreSQL database at dsn (a postgres:// URL or a key=value DSN), creates or
// migrates its schema (refusing a database whose schema is newer than this program's), and starts the
// writer and the retention sweeper, which Close stops. Several processes may Open one database at
// once: migrations run one at a time under an advisory lock.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	if cfg.Replica != "" && !store.ReplicaName.MatchString(cfg.Replica) {
		return nil, fmt.Errorf("member: replica name %q: a replica's name is 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (a host's or a pod's name); give another (MUR_REPLICA)", cfg.Replica)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the address, and redacts its password only as well as it can guess:
		// name the mistake without it.
		return nil, errors.New("member: the task store's address is not a PostgreSQL address: " +
			"write it as postgres://user@host:5432/database (the password from env: or file:) or as key=value pairs (host=… dbname=…)")
	}
	where := describeHost(pc.ConnConfig.Config)
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = connectTimeout
	}
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	// Durable on return, whatever the server's default: a commit waits for its WAL to be flushed.
	pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "mur"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, openError(where, pc.ConnConfig.User, err)
	}
	if err := migrate(ctx, pool, len(migrations), migrations); err != nil {
		pool.Close()
		var newer *newerSchemaError
		if errors.As(err, &newer) {
			return nil, fmt.Errorf("member: task store at %s: %w", where, err)
		}
		return nil, openError(where, pc.ConnConfig.User, err)
	}
	owner, err := takeMemberLock(ctx, pool, where, cfg.Replica)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		pool: pool, owner: owner, where: where, replica: cfg.Replica, now: cfg.Now, log: cfg.Logger,
		retention: cfg.Retention.Or(roster.DefaultRetention), removed: cfg.Removed,
		kick: make(chan struct{}, 1), drained: make(chan struct{}), sweepKick: make(chan struct{}, 1),
	}
	if cfg.Replica == "" {
		s.cache = store.NewTaskCache()
		s.messages = store.NewMessageFilter(false)
	}
	go s.writer()
	sweepCtx, stop := context.WithCancel(context.Background())
	s.stopSweep = stop
	s.sweeping.Go(func() { s.sweepLoop(sweepCtx) })
	return s, nil
}

// openError explains why Open could not use the database, and what to do.
func openError(where, user string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "28P01" || pg.Code == "28000":
			return fmt.Errorf("member: the task store's database at %s refused user %q: %s; check the user and its password (env: or file:)", where, user, pg.Message)
		case pg.Code == "3D000":
			return fmt.Errorf("member: the task store's database at %s: %s; create it (createdb) or name another", where, pg.Message)
		case pg.Code == "42501":
			return fmt.Errorf("member: the task store's database at %s: %s; grant user %q the right to create tables in it, or create them as its owner once", where, pg.Message, user)
		}
		return fmt.Errorf("member: the task store's database at %s: %s (SQLSTATE %s)", where, pg.Message, pg.Code)
	}
	if unreachable(err) {
		return fmt.Errorf("member: the task store's database at %s is unreachable: %v; check that PostgreSQL runs there and that the address is right", where, cause(err))
	}
	return fmt.Errorf("member: the task store's database at %s: %w", where, err)
}

// describeHost names the server of c for errors: host:port, or the socket's directory.
func describeHost(c pgconn.Config) string {
	if strings.HasPrefix(c.Host, "/") {
		return c.Host + " (Unix socket)"
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// unreachable reports whether err is the database going away rather than a statement failing: the
// connection could not be made or was lost, or the server is shutting down.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 08: connection exception; 57P01..57P03: the server shuts down or cannot take connections yet.
		return strings.HasPrefix(pg.Code, "08") || strings.HasPrefix(pg.Code, "57P")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// cause is err without pgx's "failed to connect to `user=… database=…`:" prefix, which says nothing
// the message around it does not.
func cause(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

// fail wraps err, from doing what (e.g. "storing task X"), for its caller: a database that went away is
// said so, with what happens next (then).
func (s *Store) fail(what, then string, err error) error {
	if unreachable(err) {
		// The pool's idle connections died with the server (a restart): the next request opens new ones
		// rather than finding them dead one by one.
		s.pool.Reset()
		return &unreachableError{what: what, where: s.where, then: then, err: cause(err)}
	}
	return fmt.Errorf("member: %s: %w", what, err)
}

// Fail is fail for the packages that keep their own tables in the member's database (Pool): err, from
// doing what, wrapped so that a database that went away answers as the store's own reads do
// (a2a.ErrStoreUnavailable).
func (s *Store) Fail(what string, err error) error { return s.fail(what, retryRead, err) }

// unreachableError is a failure because the database could not be reached.
type unreachableError struct {
	what, where, then string
	err               error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("member: %s: the task store's database at %s is unreachable: %v; %s", e.what, e.where, e.err, e.then)
}

// Unwrap gives the cause and a2a.ErrStoreUnavailable, which the door answers with (not this error's
// text, which names the database's address).
func (e *unreachableError) Unwrap() []error { return []error{e.err, a2a.ErrStoreUnavailable} }

const (
	retryWrite = "the member keeps running and retries on the next write"
	retryRead  = "the member keeps running and reads it again on the next request"
)

// Close stops the sweeper, lets the writer write everything it was handed, and closes the pool. Writes
// handed over after Close began fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopSweep()
		s.sweeping.Wait()
		s.qmu.Lock()
		s.closed = true
		s.qmu.Unlock()
		s.wake()
		<-s.drained
		// The locks are let go before the connection closes: the server ends a closed connection's session,
		// and so its locks, some moment after, and a process opening the database again at once (a
		// restart) would find them held.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := s.owner.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
			s.log.Warn("letting go of the task store's database locks; the server lets go of them once it sees the connection closed", "err", err)
		}
		cancel()
		s.owner.Close(context.Background())
		s.pool.Close()
	})
	return nil
}

// memberLock is the key of the session-level advisory lock a process holds on its member's database
// while it has the store open ("murmur" and 1 in ASCII). A member of one process holds it alone, since
// a second process's Recover would end the first one's running tasks; replicas (DESIGN §16) hold it
// shared, each with its name's own lock beside it (replicaLock), so that a database is either one
// process's or its replicas', never both.
const memberLock = 0x6d75726d757231

// replicaLock is the key of the advisory lock of replica name: one live process per name.
func replicaLock(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("murmur-replica:" + name))
	return int64(h.Sum64())
}

// takeMemberLock takes the member lock (and, for a replica, its name's lock) on a connection of its
// own, taken out of the pool and kept until Close: a process that dies loses them with its connection.
// It refuses a database another process holds in a way this one cannot share.
func takeMemberLock(ctx context.Context, pool *pgxpool.Pool, where, replica string) (*pgx.Conn, error) {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return nil, openError(where, pool.Config().ConnConfig.User, err)
	}
	conn := pc.Hijack()
	refuse := func(err error) (*pgx.Conn, error) {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	var ok bool
	if replica == "" {
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(memberLock)).Scan(&ok); err != nil {
			return refuse(openError(where, pool.Config().ConnConfig.User, err))
		}
		if ok {
			return conn, nil
		}
		// Held: by one process (exclusive), or by replicas (shared, which this one could share too).
		var replicas bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, int64(memberLock)).Scan(&replicas); err != nil {
			return refuse(openError(where, pool.Config().ConnConfig.User, err))
		}
		if replicas {
			return refuse(fmt.Errorf("member: the task store's database at %s is in use by the replicas of a member (mur processes given a replica name, MUR_REPLICA): "+
				"a member of one process keeps its tasks in a database of its own; stop the replicas, give this member another database, or run this process as a replica too", where))
		}
		return refuse(fmt.Errorf("member: the task store's database at %s is in use by another mur process: one process keeps a member's tasks in a database, "+
			"unless the member runs as replicas, each given a name (MUR_REPLICA); stop the other, or give this member a database of its own", where))
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock_shared($1)`, int64(memberLock)).Scan(&ok); err != nil {
		return refuse(openError(where, pool.Config().ConnConfig.User, err))
	}
	if !ok {
		return refuse(fmt.Errorf("member: the task store's database at %s is in use by a mur process that runs its member as one process (no replica name): "+
			"replicas share a database only with replicas; stop that process, or run it as a replica too (MUR_REPLICA)", where))
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, replicaLock(replica)).Scan(&ok); err != nil {
		return refuse(openError(where, pool.Config().ConnConfig.User, err))
	}
	if !ok {
		return refuse(fmt.Errorf("member: replica %s already runs on the task store's database at %s: a replica's name is one live process's; "+
			"give each replica a name of its own (MUR_REPLICA), or stop the other", replica, where))
	}
	return conn, nil
}

// Pool is the store's connection pool, for the packages that keep their own tables in the member's
// database (member/push/pgpush); the schema's migrations create those tables too.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping reports whether the store can be read.
func (s *Store) Ping(ctx context.Context) error {
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT version FROM murmur_schema`).Scan(&version); err != nil {
		return s.fail("reading the task store", retryRead, err)
	}
	return nil
}

// storable reports whether s can be a text value of PostgreSQL: valid UTF-8 without NUL. A task id,
// context id or caller that is not cannot be stored; one looked up is not stored.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
