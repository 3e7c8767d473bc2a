package push

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// The defaults of a Notifier.
const (
	DefaultQueue       = 1024
	DefaultOutbox      = 100
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultMaxAttempts = 8
	DefaultTimeout     = 10 * time.Second
	// DefaultConfigsPerTask bounds the webhooks of one task.
	DefaultConfigsPerTask = 10
	// DefaultConfigsPerCaller bounds the webhooks one caller has on tasks that have not ended or with
	// changes still to deliver.
	DefaultConfigsPerCaller = 100
	// PerCaller is how many deliveries of one caller's configs run at once: a caller whose webhooks hang
	// holds these slots and no other caller's.
	PerCaller = 8
	// PerReceiver is how many deliveries of one caller's configs to one webhook host run at once: one
	// host that hangs leaves the caller's other webhooks half its slots.
	PerReceiver = PerCaller / 2
	// sweepEvery is how often the notifier compares every config with its task's stored status.
	sweepEvery = time.Minute
)

// Config is what a Notifier is given.
type Config struct {
	// Path is the task store's SQLite file; the store has opened (and created) it first.
	Path  string
	Allow Allowlist
	// Queue bounds the observed changes waiting to be written to the outbox; 0: DefaultQueue. A change
	// that finds it full is dropped (Dropped is told) and the next round compares every config with its
	// task's stored status instead, so the latest status is still delivered.
	Queue int
	// Outbox bounds the undelivered changes kept for one config; 0: DefaultOutbox (at least 2). A change
	// that finds its config's outbox full takes the place of the newest one waiting (Dropped is told):
	// the oldest waiting and the latest are kept.
	Outbox int
	// Backoff is the wait after a first failed delivery, doubled after each further one up to MaxBackoff;
	// 0: DefaultBackoff, DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts is how many times one change is tried on one webhook; 0: DefaultMaxAttempts.
	MaxAttempts int
	// Timeout bounds one delivery; 0: DefaultTimeout.
	Timeout time.Duration
	// ConfigsPerTask bounds the configs of one task; 0: DefaultConfigsPerTask. ConfigsPerCaller bounds
	// the configs one caller has on tasks that have not ended or with changes still to deliver; 0:
	// DefaultConfigsPerCaller. Create past either fails (ErrTooMany, ErrTooManyOfCaller).
	ConfigsPerTask, ConfigsPerCaller int

	Logger *slog.Logger
	// Delivered, when set, is called after each delivery attempt with its outcome: "ok", "retry" or
	// "gave_up" (metrics).
	Delivered func(outcome string)
	// Dropped, when set, is called for each change that a full queue or outbox kept from its webhooks
	// (metrics).
	Dropped func()
	// Settle, when set, returns once the store has committed every change it was handed so far. Create
	// calls it before it reads the task's status for a new config: a change published before the config
	// was watched, and committed after it (the store's UpdateSoon), would otherwise be missed.
	Settle func(context.Context) error
	// TracerProvider is what each webhook POST's CLIENT span starts on (DESIGN §17); nil means the
	// global one. Member names the member in its spans (murmur.member).
	TracerProvider trace.TracerProvider
	Member         string
}

// Notifier keeps a member's push notification configs and delivers its tasks' changes to them.
type Notifier struct {
	cfg    Config
	db     *sql.DB
	client *http.Client
	log    *slog.Logger
	tracer trace.Tracer

	mu       sync.Mutex
	watched  map[a2a.TaskID]bool // the tasks that have (or may have) a config and have not ended
	overflow bool                // a change was dropped: the next round compares every config
	stale    bool                // the outbox has changes the run goroutine did not write: read it again
	timer    *time.Timer         // wakes a round when the earliest retry is due
	timerAt  time.Time           // when timer fires; zero: it is not set

	stmts map[string]*sql.Stmt // the outbox's prepared statements, by their SQL (stmt); read-only

	changes chan change // observed, not yet in the outbox
	results chan result // deliveries ended
	kick    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// change is one observed change of a task: its status key and, when the observer had the task, the
// body to post.
type change struct {
	task a2a.TaskID
	key  string
	body []byte // nil: read the task from the store when the change is written
}

type configKey struct {
	task a2a.TaskID
	id   string
}

// WithDefaults is c with each zero field given its default (the Default constants), and Outbox at least 2.
func (c Config) WithDefaults() Config {
	cfg := c
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Outbox <= 0 {
		cfg.Outbox = DefaultOutbox
	}
	cfg.Outbox = max(cfg.Outbox, 2)
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.Backoff)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ConfigsPerTask <= 0 {
		cfg.ConfigsPerTask = DefaultConfigsPerTask
	}
	if cfg.ConfigsPerCaller <= 0 {
		cfg.ConfigsPerCaller = DefaultConfigsPerCaller
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Open opens the configs in the task store's file at cfg.Path, creating their tables when they are
// missing, and starts delivering: first whatever was waiting when the member last stopped, and the
// changes stored since that never reached the outbox.
func Open(cfg Config) (*Notifier, error) {
	cfg = cfg.WithDefaults()
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String() + "?" + q.Encode() + "&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	db.SetMaxOpenConns(2)
	if err := migrate(db); err != nil {
		_ = db.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	watched, err := watchedTasks(db)
	if err != nil {
		_ = db.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	traced, err := hasColumn(db, "tasks", "traceparent")
	if err != nil {
		_ = db.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	stmts, err := prepareAll(db, traced)
	if err != nil {
		_ = db.Close() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	n := &Notifier{
		cfg: cfg, db: db, log: cfg.Logger,
		client:   NewClient(cfg.Allow, cfg.Timeout),
		tracer:   Tracer(cfg.TracerProvider),
		watched:  watched,
		stmts:    stmts,
		overflow: true, // the first round compares every config: changes stored while the member was down
		stale:    true,
		changes:  make(chan change, cfg.Queue),
		results:  make(chan result, PerCaller),
		kick:     make(chan struct{}, 1),
		stop:     stop,
		done:     make(chan struct{}),
	}
	go n.run(ctx)
	n.wake()
	return n, nil
}

// Close stops delivering and closes the file. Changes observed are written to the outbox first;
// deliveries not made stay there for the next Open.
func (n *Notifier) Close() error {
	n.stop()
	<-n.done
	n.mu.Lock()
	if n.timer != nil {
		n.timer.Stop()
	}
	n.mu.Unlock()
	n.client.CloseIdleConnections()
	for _, st := range n.stmts {
		st.Close()
	}
	return n.db.Close()
}

// Changed tells the notifier that a task changed (an events.Hub observer). A change of a task with a
// config is queued for the outbox with the task as it then stands (c.Task, read here and not kept). It
// never blocks.
func (n *Notifier) Changed(c events.Change) {
	n.mu.Lock()
	watched := n.watched[c.TaskID]
	if watched && c.State.Terminal() {
		delete(n.watched, c.TaskID) // a task that ended changes no more
	}
	n.mu.Unlock()
	if !watched {
		return
	}
	ch := change{task: c.TaskID}
	if c.Task != nil {
		ch.key = statusKey(c.Task.Status)
		if body, err := PostBody(c.Task); err == nil {
			ch.body = body
		}
	}
	select {
	case n.changes <- ch:
	default:
		n.mu.Lock()
		n.overflow = true
		n.mu.Unlock()
		n.log.Warn("push: the queue of changes is full; a change of this task is merged into its next one", "task", c.TaskID, "queue", n.cfg.Queue)
		n.report(n.cfg.Dropped)
	}
	n.wake()
}

// Watches reports whether task id has (or may have) a config and has not ended: whether Changed would
// queue a change of it. It is the notifier's interest for events.Hub.ObserveTasks.
func (n *Notifier) Watches(id a2a.TaskID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.watched[id]
}

func (n *Notifier) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Notifier) report(fn func()) {
	if fn != nil {
		fn()
	}
}
