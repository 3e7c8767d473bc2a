package push

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
	"github.com/oklog/ulid/v2"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// The defaults of a Notifier.
const (
	DefaultQueue       = 1024
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultMaxAttempts = 8
	DefaultTimeout     = 10 * time.Second
	// MaxConfigsPerTask bounds the webhooks of one task.
	MaxConfigsPerTask = 10
	// parallel is how many deliveries of one round run at once.
	parallel = 4
	// sweepEvery is how often a round looks at every config.
	sweepEvery = time.Minute
)

// Config is what a Notifier is given.
type Config struct {
	// Path is the task store's SQLite file; the store has opened (and created) it first.
	Path  string
	Allow Allowlist
	// Queue bounds the changed tasks waiting for a round; 0: DefaultQueue.
	Queue int
	// Backoff is the wait after a first failed delivery, doubled after each further one up to MaxBackoff;
	// 0: DefaultBackoff, DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts is how many times one status is tried on one webhook; 0: DefaultMaxAttempts.
	MaxAttempts int
	// Timeout bounds one delivery; 0: DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	// Delivered, when set, is called after each delivery attempt with its outcome: "ok", "retry" or
	// "gave_up" (metrics).
	Delivered func(outcome string)
}

// Notifier keeps a member's push notification configs and delivers its tasks' changes to them.
type Notifier struct {
	cfg    Config
	db     *sql.DB
	client *http.Client
	log    *slog.Logger

	queue    chan a2a.TaskID
	mu       sync.Mutex
	overflow bool                  // the queue was full: the next round looks at every config
	failures map[configKey]failure // configs whose delivery of a status failed, by config
	timer    *time.Timer           // wakes a round when the earliest retry is due

	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

type configKey struct {
	task a2a.TaskID
	id   string
}

type failure struct {
	status   string // the status whose delivery failed
	attempts int
	next     time.Time
}

const schema = `CREATE TABLE IF NOT EXISTS push_configs (
	task_id   TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	id        TEXT    NOT NULL,
	config    TEXT    NOT NULL,  -- the TaskPushNotificationConfig as JSON
	created   INTEGER NOT NULL,  -- unix ms
	delivered TEXT,              -- the JSON of the task status last delivered (or given up on)
	PRIMARY KEY (task_id, id)
)`

// Open opens the configs in the task store's file at cfg.Path, creating their table when it is missing,
// and starts delivering: first whatever was pending when the member last stopped.
func Open(cfg Config) (*Notifier, error) {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
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
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("push: %s: %w", abs, err)
	}
	tr := &http.Transport{
		DialContext:           cfg.Allow.dialer(&net.Dialer{Timeout: cfg.Timeout}),
		MaxIdleConnsPerHost:   parallel,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	ctx, stop := context.WithCancel(context.Background())
	n := &Notifier{
		cfg: cfg, db: db, log: cfg.Logger,
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			// A redirect could lead anywhere: the webhook's own URL is the one that was allowed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		queue:    make(chan a2a.TaskID, cfg.Queue),
		failures: map[configKey]failure{},
		overflow: true, // the first round looks at every config: deliveries pending since the last run
		kick:     make(chan struct{}, 1),
		stop:     stop,
		done:     make(chan struct{}),
	}
	go n.run(ctx)
	n.wake()
	return n, nil
}

// Close stops delivering and closes the file. Deliveries not made stay pending for the next Open.
func (n *Notifier) Close() error {
	n.stop()
	<-n.done
	n.mu.Lock()
	if n.timer != nil {
		n.timer.Stop()
	}
	n.mu.Unlock()
	n.client.CloseIdleConnections()
	return n.db.Close()
}

// Changed tells the notifier that a task changed (an events.Hub observer). It never blocks.
func (n *Notifier) Changed(c events.Change) {
	select {
	case n.queue <- c.TaskID:
	default:
		n.mu.Lock()
		n.overflow = true
		n.mu.Unlock()
	}
	n.wake()
}

func (n *Notifier) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// ErrNotFound is the failure of Get for a config the task does not have.
var ErrNotFound = errors.New("push notification config not found")

// Create stores c (its ID chosen when empty; a config of the same ID is replaced) after checking its URL
// against the allowlist, and returns it as stored. The caller has checked that the task exists. The new
// config gets the task's current status at once.
func (n *Notifier) Create(ctx context.Context, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error) {
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
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer tx.Rollback()
	var count int
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(id = ?), 0) > 0 FROM push_configs WHERE task_id = ?`, c.ID, string(c.TaskID)).Scan(&count, &exists); err != nil {
		return c, err
	}
	if !exists && count >= MaxConfigsPerTask {
		return c, fmt.Errorf("%w: task %s has %d push notification configs, the most one task may have; delete one first", ErrTooMany, c.TaskID, count)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO push_configs (task_id, id, config, created) VALUES (?, ?, ?, ?)
		ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config, delivered = NULL`,
		string(c.TaskID), c.ID, string(body), time.Now().UnixMilli()); err != nil {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return c, err
	}
	n.Changed(events.Change{TaskID: c.TaskID})
	return c, nil
}

// CheckURL checks a webhook URL against the allowlist, as Create does, storing nothing.
func (n *Notifier) CheckURL(u string) error {
	_, err := n.cfg.Allow.CheckURL(u)
	return err
}

// ErrTooMany is the failure of Create past MaxConfigsPerTask.
var ErrTooMany = errors.New("too many push notification configs")

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

// Delete removes a config; deleting one that does not exist is not an error.
func (n *Notifier) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	_, err := n.db.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, string(task), id)
	n.mu.Lock()
	delete(n.failures, configKey{task, id})
	n.mu.Unlock()
	return err
}

// run takes rounds until Close.
func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	// A full round now and then is the safety net of a kick that was lost (a change stored by a writer
	// that reports to no hub, such as the store's recovery).
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-sweep.C:
			n.mu.Lock()
			n.overflow = true
			n.mu.Unlock()
		}
		n.round(ctx)
	}
}

// pending is one delivery to make: a config and the task as it stands.
type pending struct {
	key    configKey
	config a2a.TaskPushNotificationConfig
	status string
	task   []byte
}

// round delivers what is pending for the queued tasks, or for every task after an overflow or when a
// retry is due.
func (n *Notifier) round(ctx context.Context) {
	tasks := map[a2a.TaskID]bool{}
	for drained := false; !drained; {
		select {
		case id := <-n.queue:
			tasks[id] = true
		default:
			drained = true
		}
	}
	n.mu.Lock()
	all := n.overflow
	n.overflow = false
	now := time.Now()
	for k, f := range n.failures {
		if !f.next.After(now) {
			tasks[k.task] = true
		}
	}
	n.mu.Unlock()
	if !all && len(tasks) == 0 {
		return
	}
	work, err := n.pending(ctx, all, tasks)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Error("push: reading pending deliveries", "err", err)
			n.mu.Lock()
			n.overflow = true
			n.mu.Unlock()
			n.retryAt(time.Now().Add(n.cfg.Backoff))
		}
		return
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var dmu sync.Mutex
	var done []pending // delivered or given up: recorded together, in one transaction
	defer func() {
		wg.Wait()
		n.markDelivered(done)
	}()
	for _, p := range work {
		n.mu.Lock()
		f, failed := n.failures[p.key]
		n.mu.Unlock()
		if failed && f.status == p.status && f.next.After(time.Now()) {
			n.retryAt(f.next)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if n.deliver(ctx, p, f, failed && f.status == p.status) {
				dmu.Lock()
				done = append(done, p)
				dmu.Unlock()
			}
		})
	}
}

// pending reads the configs whose task's status is not the one they last delivered.
func (n *Notifier) pending(ctx context.Context, all bool, tasks map[a2a.TaskID]bool) ([]pending, error) {
	q := `SELECT p.task_id, p.id, p.config, json_extract(t.task, '$.status'), t.task
		FROM push_configs p JOIN tasks t ON t.id = p.task_id
		WHERE p.delivered IS NOT json_extract(t.task, '$.status')`
	var args []any
	if !all {
		marks := make([]string, 0, len(tasks))
		for id := range tasks {
			marks = append(marks, "?")
			args = append(args, string(id))
		}
		q += ` AND p.task_id IN (` + strings.Join(marks, ",") + `)`
	}
	rows, err := n.db.QueryContext(ctx, q+` ORDER BY p.task_id, p.created`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pending
	for rows.Next() {
		var p pending
		var task, body string
		if err := rows.Scan(&task, &p.key.id, &body, &p.status, &p.task); err != nil {
			return nil, err
		}
		p.key.task = a2a.TaskID(task)
		if err := json.Unmarshal([]byte(body), &p.config); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// deliver posts the task to one webhook. It reports whether the status needs no more delivery to this
// config (delivered, or given up on); a failure is scheduled for a retry.
func (n *Notifier) deliver(ctx context.Context, p pending, f failure, again bool) bool {
	err := n.post(ctx, p)
	if ctx.Err() != nil {
		return false // closing: the delivery stays pending for the next Open
	}
	if err == nil {
		n.report("ok")
		return true
	}
	if !again {
		f = failure{status: p.status}
	}
	f.attempts++
	if f.attempts >= n.cfg.MaxAttempts || errors.Is(err, ErrNotAllowed) {
		n.log.Warn("push: giving up a delivery", "task", p.key.task, "config", p.key.id, "url", p.config.URL, "attempts", f.attempts, "err", err)
		n.report("gave_up")
		return true
	}
	wait := min(n.cfg.Backoff<<(f.attempts-1), n.cfg.MaxBackoff)
	wait += time.Duration(rand.Int64N(int64(wait)/4 + 1))
	f.next = time.Now().Add(wait)
	n.log.Info("push: delivery failed; will retry", "task", p.key.task, "config", p.key.id, "attempt", f.attempts, "in", wait, "err", err)
	n.mu.Lock()
	n.failures[p.key] = f
	n.mu.Unlock()
	n.retryAt(f.next)
	n.report("retry")
	return false
}

func (n *Notifier) report(outcome string) {
	if n.cfg.Delivered != nil {
		n.cfg.Delivered(outcome)
	}
}

// markDelivered records that each of done's statuses needs no more delivery to its config, in one
// transaction (one fsync a round). It runs even while the notifier closes: those deliveries were made.
func (n *Notifier) markDelivered(done []pending) {
	if len(done) == 0 {
		return
	}
	n.mu.Lock()
	for _, p := range done {
		delete(n.failures, p.key)
	}
	n.mu.Unlock()
	err := func() error {
		tx, err := n.db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, p := range done {
			if _, err := tx.Exec(`UPDATE push_configs SET delivered = ? WHERE task_id = ? AND id = ?`,
				p.status, string(p.key.task), p.key.id); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		n.log.Error("push: recording deliveries; they will be made again", "deliveries", len(done), "err", err)
	}
}

// retryAt makes sure a round runs at t.
func (n *Notifier) retryAt(t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := max(time.Until(t), 0)
	if n.timer == nil {
		n.timer = time.AfterFunc(d, n.wake)
		return
	}
	n.timer.Reset(d)
}

// post sends {"task": …} without its history to the config's URL.
func (n *Notifier) post(ctx context.Context, p pending) error {
	var t a2a.Task
	if err := json.Unmarshal(p.task, &t); err != nil {
		return err
	}
	t.History = nil
	body, err := json.Marshal(a2a.StreamResponse{Task: &t})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.config.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.config.Token != "" {
		req.Header.Set("A2A-Notification-Token", p.config.Token)
		req.Header.Set("X-A2A-Notification-Token", p.config.Token)
	}
	if a := p.config.Authentication; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", a.Scheme+" "+a.Credentials)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the webhook answered HTTP %d", resp.StatusCode)
	}
	return nil
}
