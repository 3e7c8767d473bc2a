package push

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
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

// NewClient is the HTTP client webhooks are posted with: each address a URL resolves to is checked
// against allow when it connects, a post is bounded by timeout, and a redirect is not followed (it
// could lead anywhere: the webhook's own URL is the one that was allowed).
func NewClient(allow Allowlist, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:           allow.dialer(&net.Dialer{Timeout: timeout}),
		MaxIdleConnsPerHost:   PerCaller,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Notifier keeps a member's push notification configs and delivers its tasks' changes to them.
type Notifier struct {
	cfg    Config
	db     *sql.DB
	client *http.Client
	log    *slog.Logger
	tracer trace.Tracer
	traced bool // the task store's tasks table keeps each task's traceparent (its schema 6)

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

const schema = `CREATE TABLE IF NOT EXISTS push_configs (
	task_id   TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	id        TEXT    NOT NULL,
	config    TEXT    NOT NULL,  -- the TaskPushNotificationConfig as JSON
	created   INTEGER NOT NULL,  -- unix ms
	PRIMARY KEY (task_id, id)
);
CREATE TABLE IF NOT EXISTS push_outbox (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id   TEXT    NOT NULL,
	config_id TEXT    NOT NULL,
	status    TEXT    NOT NULL,  -- the status key of the change (statusKey)
	body      TEXT    NOT NULL,  -- what is posted: {"task": …} as the task stood at the change
	created   INTEGER NOT NULL,  -- unix ms
	traceparent TEXT  NOT NULL DEFAULT '', -- the task's trace context, which the POST carries
	FOREIGN KEY (task_id, config_id) REFERENCES push_configs (task_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS push_outbox_config ON push_outbox (task_id, config_id, seq)`

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
		traced:   traced,
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

// migrate creates the tables, and gives a push_configs of before the outbox its column queued, and one
// of before fair delivery its column caller.
func migrate(db *sql.DB) error {
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	if err := migrateQueued(db); err != nil {
		return err
	}
	// traceparent: the trace context of the task whose change an outbox row holds (DESIGN §17); the rows
	// of before it are posted in no trace.
	if has, err := hasColumn(db, "push_outbox", "traceparent"); err != nil {
		return err
	} else if !has {
		if _, err := db.Exec(`ALTER TABLE push_outbox ADD COLUMN traceparent TEXT NOT NULL DEFAULT ''`); err != nil {
			return err
		}
	}
	has, err := hasColumn(db, "push_configs", "caller")
	if err != nil || has {
		return err
	}
	// caller: who made the config, as the task store names callers ('' for the operator, a member's name
	// for a peer); its deliveries take that caller's slots. A config of before it is taken for its task's
	// caller's (the store's tasks.caller, when the file has one): the one caller but the operator who
	// could make it. In one transaction: a crash half way leaves no column without its callers.
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`ALTER TABLE push_configs ADD COLUMN caller TEXT NOT NULL DEFAULT ''`); err != nil {
		return err
	}
	if _, err := tx.Exec(`CREATE INDEX push_configs_caller ON push_configs (caller)`); err != nil {
		return err
	}
	var callers bool
	if err := tx.QueryRow(`SELECT count(*) > 0 FROM pragma_table_info('tasks') WHERE name = 'caller'`).Scan(&callers); err != nil {
		return err
	}
	if callers {
		if _, err := tx.Exec(`UPDATE push_configs SET caller = coalesce((SELECT t.caller FROM tasks t WHERE t.id = push_configs.task_id), '')`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// migrateQueued gives a push_configs of before the outbox its column queued.
func migrateQueued(db *sql.DB) error {
	has, err := hasColumn(db, "push_configs", "queued")
	if err != nil || has {
		return err
	}
	// queued: the status key of the change last put in the outbox for the config. A config that had
	// delivered its task's current status (the column delivered, of before the outbox) has queued it.
	if _, err := db.Exec(`ALTER TABLE push_configs ADD COLUMN queued TEXT`); err != nil {
		return err
	}
	if old, err := hasColumn(db, "push_configs", "delivered"); err != nil || !old {
		return err
	}
	_, err = db.Exec(`UPDATE push_configs SET queued = (SELECT ` + sqlStatusKey + ` FROM tasks t
		WHERE t.id = push_configs.task_id AND push_configs.delivered IS json_extract(t.task, '$.status'))`)
	return err
}

// hasColumn reports whether table has column.
func hasColumn(db *sql.DB, table, column string) (bool, error) {
	var has bool
	err := db.QueryRow(`SELECT count(*) > 0 FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&has)
	return has, err
}

// watchedTasks returns the tasks that have a config.
func watchedTasks(db *sql.DB) (map[a2a.TaskID]bool, error) {
	rows, err := db.Query(`SELECT DISTINCT task_id FROM push_configs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[a2a.TaskID]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[a2a.TaskID(id)] = true
	}
	return out, rows.Err()
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

// statusKey tells one stored status from another: its state, its time and its message's id.
func statusKey(s a2a.TaskStatus) string {
	k := string(s.State) + " "
	if s.Timestamp != nil {
		b, _ := s.Timestamp.MarshalJSON()
		k += strings.Trim(string(b), `"`)
	}
	k += " "
	if s.Message != nil {
		k += string(s.Message.MessageID)
	}
	return k
}

// sqlStatusKey is statusKey of a stored task's JSON, in SQL.
const sqlStatusKey = `json_extract(t.task, '$.status.state') || ' ' || coalesce(json_extract(t.task, '$.status.timestamp'), '') || ' ' || coalesce(json_extract(t.task, '$.status.message.messageId'), '')`

// keyState is the task state of a status key.
func keyState(key string) a2a.TaskState {
	s, _, _ := strings.Cut(key, " ")
	return a2a.TaskState(s)
}

// PostBody is what a webhook is posted for t: {"task": …} without its history.
func PostBody(t *a2a.Task) ([]byte, error) {
	cp := *t
	cp.History = nil
	return json.Marshal(a2a.StreamResponse{Task: &cp})
}

// ErrNotFound is the failure of Get for a config the task does not have.
var ErrNotFound = errors.New("push notification config not found")

// Create stores c for caller (who makes it, as the task store names callers: "" for the operator, a
// member's name for a peer; its deliveries take that caller's slots) after checking its URL against
// the allowlist and the bounds of configs per task (ErrTooMany) and per caller (ErrTooManyOfCaller),
// and returns it as stored. Its ID is chosen when empty; a config of the same ID is replaced, with what
// it had waiting, and is not one more. The door has checked that the task exists. The new config gets
// the task's current status first.
func (n *Notifier) Create(ctx context.Context, caller string, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error) {
	if _, err := n.cfg.Allow.CheckURL(c.URL); err != nil {
		return c, err
	}
	if c.ID == "" {
		c.ID = "pnc_" + strings.ToLower(ulid.Make().String())
	}
	body, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	// Watched before the task is read: a change stored after the read is observed and queued.
	n.mu.Lock()
	n.watched[c.TaskID] = true
	n.mu.Unlock()
	if n.cfg.Settle != nil {
		if err := n.cfg.Settle(ctx); err != nil {
			return c, err
		}
	}
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer tx.Rollback()
	if err := n.checkRoom(ctx, tx, caller, c.TaskID, c.ID); err != nil {
		return c, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, string(c.TaskID), c.ID); err != nil {
		return c, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO push_configs (task_id, id, config, created, caller) VALUES (?, ?, ?, ?, ?)`,
		string(c.TaskID), c.ID, string(body), time.Now().UnixMilli(), caller); err != nil {
		return c, err
	}
	var task string
	if err := tx.QueryRowContext(ctx, `SELECT task FROM tasks WHERE id = ?`, string(c.TaskID)).Scan(&task); err != nil {
		return c, fmt.Errorf("push: reading task %s: %w", c.TaskID, err)
	}
	var t a2a.Task
	if err := json.Unmarshal([]byte(task), &t); err != nil {
		return c, err
	}
	post, err := PostBody(&t)
	if err != nil {
		return c, err
	}
	tp, err := n.traceOf(ctx, tx, c.TaskID)
	if err != nil {
		return c, err
	}
	if err := n.enqueueOne(ctx, tx, configKey{c.TaskID, c.ID}, statusKey(t.Status), post, tp); err != nil {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return c, err
	}
	if t.Status.State.Terminal() {
		n.mu.Lock()
		delete(n.watched, c.TaskID)
		n.mu.Unlock()
	}
	n.reread()
	return c, nil
}

// CheckURL checks a webhook URL against the allowlist, as Create does, storing nothing.
func (n *Notifier) CheckURL(u string) error {
	_, err := n.cfg.Allow.CheckURL(u)
	return err
}

// CheckRoom reports whether Create would now take one more config of caller for a task that has none
// yet: ErrTooManyOfCaller when not. It stores nothing; the door asks before it starts a task whose
// message carries a config, so a config refused for its caller starts no task.
func (n *Notifier) CheckRoom(ctx context.Context, caller string) error {
	return n.checkRoom(ctx, n.db, caller, "", "")
}

// querier is what checkRoom reads with: the database, or a transaction of it.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkRoom checks, in q, both bounds for a config id of caller's for task (task "": the caller's bound
// only); a config of that id is replaced, so it is not one more.
func (n *Notifier) checkRoom(ctx context.Context, q querier, caller string, task a2a.TaskID, id string) error {
	if task != "" {
		var count int
		var exists bool
		if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(id = ?), 0) > 0 FROM push_configs WHERE task_id = ?`, id, string(task)).Scan(&count, &exists); err != nil {
			return err
		}
		if !exists && count >= n.cfg.ConfigsPerTask {
			return TooMany(task, count)
		}
	}
	var mine int
	if err := q.QueryRowContext(ctx, qConfigsOfCaller, caller, string(task), id, n.cfg.ConfigsPerCaller).Scan(&mine); err != nil {
		return err
	}
	if mine >= n.cfg.ConfigsPerCaller {
		return TooManyOfCaller(mine)
	}
	return nil
}

// qConfigsOfCaller counts, up to a limit, a caller's configs but one (task, id) that still count toward
// Config.ConfigsPerCaller: those that have not queued their task's end (its state is the status key's
// first word), and those with changes waiting.
const qConfigsOfCaller = `SELECT count(*) FROM (SELECT 1 FROM push_configs p WHERE p.caller = ? AND NOT (p.task_id = ? AND p.id = ?)
	AND (p.queued IS NULL
		OR substr(p.queued, 1, instr(p.queued, ' ') - 1) NOT IN ('` + string(a2a.TaskStateCompleted) + `', '` +
	string(a2a.TaskStateFailed) + `', '` + string(a2a.TaskStateCanceled) + `', '` + string(a2a.TaskStateRejected) + `')
		OR EXISTS (SELECT 1 FROM push_outbox o WHERE o.task_id = p.task_id AND o.config_id = p.id)) LIMIT ?)`

// ErrTooMany is the failure of Create past Config.ConfigsPerTask.
var ErrTooMany = errors.New("too many push notification configs for this task")

// ErrTooManyOfCaller is the failure of Create past Config.ConfigsPerCaller.
var ErrTooManyOfCaller = errors.New("too many push notification configs for one caller")

// TooMany is ErrTooMany for a task that has count configs, saying what to do.
func TooMany(task a2a.TaskID, count int) error {
	return fmt.Errorf("%w: task %s has %d push notification configs, the most one task may have (push.max_configs_per_task of this member's murmur.yaml); delete one with DeleteTaskPushNotificationConfig first, or replace one by giving its id",
		ErrTooMany, task, count)
}

// TooManyOfCaller is ErrTooManyOfCaller for a caller that has count configs that count, saying what to do.
func TooManyOfCaller(count int) error {
	return fmt.Errorf("%w: you have %d push notification configs on tasks that have not ended or with notifications still to deliver, the most one caller may have (push.max_configs_per_caller of this member's murmur.yaml); delete one with DeleteTaskPushNotificationConfig, or wait until your tasks end and their webhooks take what is waiting",
		ErrTooManyOfCaller, count)
}

// Get returns one config of a task.
func (n *Notifier) Get(ctx context.Context, task a2a.TaskID, id string) (a2a.TaskPushNotificationConfig, error) {
	var body string
	err := n.db.QueryRowContext(ctx, `SELECT config FROM push_configs WHERE task_id = ? AND id = ?`, string(task), id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return a2a.TaskPushNotificationConfig{}, ErrNotFound
	}
	var c a2a.TaskPushNotificationConfig
	if err == nil {
		err = json.Unmarshal([]byte(body), &c)
	}
	return c, err
}

// List returns a task's configs, oldest first.
func (n *Notifier) List(ctx context.Context, task a2a.TaskID) ([]a2a.TaskPushNotificationConfig, error) {
	rows, err := n.db.QueryContext(ctx, `SELECT config FROM push_configs WHERE task_id = ? ORDER BY created, id`, string(task))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []a2a.TaskPushNotificationConfig{}
	for rows.Next() {
		var body string
		var c a2a.TaskPushNotificationConfig
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Delete removes a config and what it had waiting; deleting one that does not exist is not an error.
func (n *Notifier) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	_, err := n.db.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, string(task), id)
	return err
}

func (n *Notifier) report(fn func()) {
	if fn != nil {
		fn()
	}
}
