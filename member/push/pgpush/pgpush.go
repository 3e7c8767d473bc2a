// Package pgpush keeps the push notification configs of a member whose tasks are on PostgreSQL, and
// delivers them from whichever of its replicas is free (DESIGN §16: push delivery at any replica). It
// is package push's Notifier for the database every replica shares: the same methods for the door, the
// same allowlist, client, bounds, body and headers (push's exported parts), with the queueing and the
// claiming done by the database.
//
// Queueing: the configs and their outbox are tables of the member's database (push_configs,
// push_outbox: schema 6 of member/store/postgres), and a trigger on the tasks table queues each change
// of a task's status to every config of the task in the transaction of the change, whichever replica or
// statement made it (the owner's write, a reap, a cancel at another replica, a restart). No change is
// missed while a replica is down, and none is queued twice. A config's outbox holds Config.Push.Outbox
// changes (schema 9); a change finding it full takes the place of the newest one waiting. A new config gets the task's status as it
// stands in the transaction that stores it, under a lock on the task's row, so a change committed at
// once after it is queued by the trigger.
//
// Delivery: every replica looks at the outbox when told (channel murmur_push, and its own Create) and
// every Poll. It takes the oldest waiting change of each config (its head) that no replica has claimed
// and that is due, claims it (claimed_by, claimed_until: a compare-and-set, so exactly one replica
// does), posts it, and then deletes it, or, when the post failed, puts it back with a later due time
// (the backoff of push.Config, up to MaxAttempts, then it is given up). Only a config's head is ever
// claimed, so a config's changes are delivered in order, one at a time, whichever replicas deliver them.
// A replica that dies holding a claim loses it after ClaimFor, and another replica posts that change
// again: delivery is at least once, as in a member of one process. Each replica gives one caller's
// configs push.PerCaller posts at once, push.PerReceiver of them to one host.
//
// Tracing: each change carries its task's traceparent (the task row's, copied by the trigger: schema
// 8), and is posted as push.Deliver posts, in that trace, whichever replica posts it.
//
// Imports: a2a, member/push, member/store/postgres; never member.
package pgpush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/push"
	"github.com/murmur-run/murmur/member/store/postgres"
)

// The defaults of a Notifier.
const (
	// DefaultPoll is how often a replica looks at the outbox untold: a lost notification, a retry
	// falling due at another replica's change, a claim that lapsed.
	DefaultPoll = time.Second
	// heads bounds the heads one look reads: the rest wait for the next.
	heads = 512
)

// Config is what a Notifier is given.
type Config struct {
	// Push is the allowlist, backoff, attempts, timeout, bounds, logger and callbacks, as for a
	// push.Notifier; its Path, Queue, Dropped and Settle are not used. Its Outbox bounds the changes
	// waiting for one config, as a push.Notifier's does (push.DefaultOutbox unless set, at least 2): a
	// change finding the outbox full takes the place of the newest one waiting, unless that one is
	// being posted. The bound is kept with each config when it is stored, and the database's trigger
	// keeps to it whichever replica queues a change.
	Push push.Config
	// Poll is how often the outbox is looked at untold; 0: DefaultPoll.
	Poll time.Duration
	// ClaimFor is how long a claim keeps a change from the other replicas; 0: twice Push.Timeout. A
	// claim outlives any post, so only a replica that died (or lost its database) lets one lapse.
	ClaimFor time.Duration
	// Now is the clock of claims and retries; nil: time.Now. The replicas' clocks are taken to agree
	// within a second, as their leases do.
	Now func() time.Time
}

// Notifier keeps the push notification configs of a member on PostgreSQL and delivers their changes.
// It is safe for concurrent use.
type Notifier struct {
	cfg    Config
	store  *postgres.Store
	me     string // claimed_by: the replica's name
	client *http.Client
	log    *slog.Logger
	tracer trace.Tracer

	kick    chan struct{}
	results chan result
	stop    context.CancelFunc
	done    chan struct{}
}

// Open starts delivering the outbox of the member in store's database, as the store's replica (or as
// "member" for a member of one process). Claims its name held before (a previous process of it, dead
// since: two live processes never share a name) are let go at once.
func Open(store *postgres.Store, cfg Config) (*Notifier, error) {
	cfg.Push = cfg.Push.WithDefaults()
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.ClaimFor <= 0 {
		cfg.ClaimFor = 2 * cfg.Push.Timeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	me := store.Replica()
	if me == "" {
		me = "member"
	}
	n := &Notifier{cfg: cfg, store: store, me: me, client: push.NewClient(cfg.Push.Allow, cfg.Push.Timeout),
		log: cfg.Push.Logger, tracer: push.Tracer(cfg.Push.TracerProvider), kick: make(chan struct{}, 1), results: make(chan result, push.PerCaller), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.unclaim(ctx); err != nil {
		return nil, store.Fail("letting go of the push deliveries this replica's name had claimed", err)
	}
	run, stop := context.WithCancel(context.Background())
	n.stop = stop
	go n.run(run)
	return n, nil
}

// Close stops delivering: the posts in flight are abandoned and their changes let go of, for another
// replica (or this one's next process) to post.
func (n *Notifier) Close() error {
	n.stop()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.client.CloseIdleConnections()
	return n.unclaim(ctx)
}

// unclaim lets go of every change this replica's name claimed.
func (n *Notifier) unclaim(ctx context.Context) error {
	_, err := n.store.Pool().Exec(ctx, `UPDATE push_outbox SET claimed_by = '', claimed_until = 0 WHERE claimed_by = $1`, n.me)
	return err
}

// wake asks the run goroutine to look at the outbox.
func (n *Notifier) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// terminal reports whether a task's state (the tasks table's column) is an end.
func terminal(state string) bool { return a2a.TaskState(state).Terminal() }

// Create stores c for caller ("" the operator, a member's name a peer) after checking its URL against
// the allowlist and the bounds of configs per task (push.ErrTooMany) and per caller
// (push.ErrTooManyOfCaller), and returns it as stored. Its ID is chosen when empty; a config of the
// same ID is replaced, with what it had waiting. The new config gets the task's status as it stands.
func (n *Notifier) Create(ctx context.Context, caller string, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error) {
	if _, err := n.cfg.Push.Allow.CheckURL(c.URL); err != nil {
		return c, err
	}
	if c.ID == "" {
		c.ID = "pnc_" + strings.ToLower(ulid.Make().String())
	}
	config, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	what := fmt.Sprintf("storing push notification config %s of task %s", c.ID, c.TaskID)
	tx, err := n.store.Pool().Begin(ctx)
	if err != nil {
		return c, n.store.Fail(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The task's row is locked until the config is committed: a change of the task waits, and its
	// trigger then finds the config.
	var task []byte
	var state, tp string
	err = tx.QueryRow(ctx, `SELECT task, state, traceparent FROM tasks WHERE id = $1 FOR SHARE`, string(c.TaskID)).Scan(&task, &state, &tp)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("push: task %s is not in the store: %w", c.TaskID, a2a.ErrTaskNotFound)
	} else if err != nil {
		return c, n.store.Fail(what, err)
	}
	if err := n.checkRoom(ctx, tx, caller, c.TaskID, c.ID); err != nil {
		return c, err
	}
	var t a2a.Task
	if err := json.Unmarshal(task, &t); err != nil {
		return c, fmt.Errorf("push: reading task %s: %w", c.TaskID, err)
	}
	body, err := push.PostBody(&t)
	if err != nil {
		return c, err
	}
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM push_configs WHERE task_id = $1 AND id = $2`, string(c.TaskID), c.ID)
	batch.Queue(`INSERT INTO push_configs (task_id, id, config, url, caller, created, ended, outbox) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		string(c.TaskID), c.ID, config, c.URL, caller, n.cfg.Now().UnixMilli(), terminal(state), n.cfg.Push.Outbox)
	batch.Queue(`INSERT INTO push_outbox (task_id, config_id, body, traceparent) VALUES ($1, $2, $3, $4)`, string(c.TaskID), c.ID, body, tp)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return c, n.store.Fail(what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return c, n.store.Fail(what, err)
	}
	n.wake()
	return c, nil
}

// CheckURL checks a webhook URL against the allowlist, as Create does, storing nothing.
func (n *Notifier) CheckURL(u string) error {
	_, err := n.cfg.Push.Allow.CheckURL(u)
	return err
}

// CheckRoom reports whether Create would now take one more config of caller for a task that has none
// yet: push.ErrTooManyOfCaller when not. It stores nothing.
func (n *Notifier) CheckRoom(ctx context.Context, caller string) error {
	return n.checkRoom(ctx, n.store.Pool(), caller, "", "")
}

// querier is what checkRoom reads with: the pool, or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkRoom checks, in q, both bounds for a config id of caller's for task (task "": the caller's bound
// only); a config of that id is replaced, so it is not one more. A caller's configs count while their
// task has not ended or they have changes waiting.
func (n *Notifier) checkRoom(ctx context.Context, q querier, caller string, task a2a.TaskID, id string) error {
	if task != "" {
		var count int
		var exists bool
		if err := q.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(id = $2), false) FROM push_configs WHERE task_id = $1`,
			string(task), id).Scan(&count, &exists); err != nil {
			return n.store.Fail("counting the push notification configs of task "+string(task), err)
		}
		if !exists && count >= n.cfg.Push.ConfigsPerTask {
			return push.TooMany(task, count)
		}
	}
	var mine int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM push_configs p
		WHERE p.caller = $1 AND NOT (p.task_id = $2 AND p.id = $3)
		AND (NOT p.ended OR EXISTS (SELECT 1 FROM push_outbox o WHERE o.task_id = p.task_id AND o.config_id = p.id)) LIMIT $4) mine`,
		caller, string(task), id, n.cfg.Push.ConfigsPerCaller).Scan(&mine); err != nil {
		return n.store.Fail("counting a caller's push notification configs", err)
	}
	if mine >= n.cfg.Push.ConfigsPerCaller {
		return push.TooManyOfCaller(mine)
	}
	return nil
}

// Get returns one config of a task: push.ErrNotFound when the task has none of that id.
func (n *Notifier) Get(ctx context.Context, task a2a.TaskID, id string) (a2a.TaskPushNotificationConfig, error) {
	var body []byte
	err := n.store.Pool().QueryRow(ctx, `SELECT config FROM push_configs WHERE task_id = $1 AND id = $2`, string(task), id).Scan(&body)
	var c a2a.TaskPushNotificationConfig
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return c, push.ErrNotFound
	case err != nil:
		return c, n.store.Fail("reading push notification config "+id, err)
	}
	return c, json.Unmarshal(body, &c)
}

// List returns a task's configs, oldest first.
func (n *Notifier) List(ctx context.Context, task a2a.TaskID) ([]a2a.TaskPushNotificationConfig, error) {
	rows, err := n.store.Pool().Query(ctx, `SELECT config FROM push_configs WHERE task_id = $1 ORDER BY created, id`, string(task))
	if err != nil {
		return nil, n.store.Fail("listing the push notification configs of task "+string(task), err)
	}
	out := []a2a.TaskPushNotificationConfig{}
	for rows.Next() {
		var body []byte
		var c a2a.TaskPushNotificationConfig
		if err := rows.Scan(&body); err != nil {
			rows.Close()
			return nil, err
		}
		if err := json.Unmarshal(body, &c); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, n.store.Fail("listing the push notification configs of task "+string(task), err)
	}
	return out, nil
}

// Delete removes a config and what it had waiting; deleting one that does not exist is not an error.
// A post of it in flight at a replica still ends.
func (n *Notifier) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	if _, err := n.store.Pool().Exec(ctx, `DELETE FROM push_configs WHERE task_id = $1 AND id = $2`, string(task), id); err != nil {
		return n.store.Fail("deleting push notification config "+id, err)
	}
	return nil
}

// configKey is one config of one task.
type configKey struct {
	task, id string
}

// head is a config's oldest waiting change.
type head struct {
	seq      int64
	key      configKey
	due      int64 // unix ms
	caller   string
	url      string
	attempts int
}

// result is the end of one post.
type result struct {
	head
	err error
}

// lane is a caller's posts to one webhook host.
type lane struct{ caller, host string }

// deliveries is the run goroutine's own state: the posts in flight and the slots they hold.
type deliveries struct {
	inflight map[configKey]bool
	callers  map[string]int
	hosts    map[lane]int
	posts    sync.WaitGroup
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return strings.ToLower(u.Host)
	}
	return ""
}

// run looks at the outbox when told, when a retry falls due and every Poll, until ctx ends; then it
// waits for the posts in flight.
func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	d := &deliveries{inflight: map[configKey]bool{}, callers: map[string]int{}, hosts: map[lane]int{}}
	defer d.posts.Wait()
	go n.listen(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-n.results:
			n.settle(ctx, d, r)
		case <-n.kick:
		case <-timer.C:
		}
		next := n.look(ctx, d)
		timer.Reset(next)
	}
}

// look starts a post of every head that is due, unclaimed and has a free slot, and returns how long
// until it should look again: at the earliest due time it saw, at most Poll.
func (n *Notifier) look(ctx context.Context, d *deliveries) time.Duration {
	now := n.cfg.Now().UnixMilli()
	rows, err := n.store.Pool().Query(ctx, `SELECT h.seq, h.task_id, h.config_id, h.due, h.attempts, p.caller, p.url
		FROM (SELECT DISTINCT ON (task_id, config_id) seq, task_id, config_id, due, attempts, claimed_until
			FROM push_outbox ORDER BY task_id, config_id, seq) h
		JOIN push_configs p ON p.task_id = h.task_id AND p.id = h.config_id
		WHERE h.claimed_until <= $1 ORDER BY h.due, h.seq LIMIT $2`, now, heads)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("push: reading the outbox failed; trying again", "err", err)
		}
		return n.cfg.Poll
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (head, error) {
		var h head
		err := r.Scan(&h.seq, &h.key.task, &h.key.id, &h.due, &h.attempts, &h.caller, &h.url)
		return h, err
	})
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("push: reading the outbox failed; trying again", "err", err)
		}
		return n.cfg.Poll
	}
	next := n.cfg.Poll
	for _, h := range hs {
		if d.inflight[h.key] {
			continue
		}
		if h.due > now {
			next = min(next, time.Duration(h.due-now)*time.Millisecond)
			continue
		}
		l := lane{h.caller, hostOf(h.url)}
		if d.callers[h.caller] >= push.PerCaller || d.hosts[l] >= push.PerReceiver {
			continue // a post of this caller ends first, and its result looks again
		}
		c, body, tp, ok := n.claim(ctx, h, now)
		if !ok {
			continue
		}
		d.inflight[h.key] = true
		d.callers[h.caller]++
		d.hosts[l]++
		d.posts.Add(1)
		go func() {
			defer d.posts.Done()
			err := push.Deliver(ctx, n.tracer, n.client, push.Delivery{Config: c, Body: body, Traceparent: tp, Member: n.cfg.Push.Member})
			select {
			case n.results <- result{h, err}:
			case <-ctx.Done():
			}
		}()
	}
	return next
}

// claim takes h for this replica unless another replica took it since it was read (or it was
// delivered, or its config deleted), and returns its config, body and the traceparent of its task.
func (n *Notifier) claim(ctx context.Context, h head, now int64) (a2a.TaskPushNotificationConfig, []byte, string, bool) {
	var c a2a.TaskPushNotificationConfig
	var config, body []byte
	var tp string
	err := n.store.Pool().QueryRow(ctx, `UPDATE push_outbox o SET claimed_by = $2, claimed_until = $3
		FROM push_configs p WHERE o.seq = $1 AND o.claimed_until <= $4 AND p.task_id = o.task_id AND p.id = o.config_id
		RETURNING p.config, o.body, o.traceparent`, h.seq, n.me, now+n.cfg.ClaimFor.Milliseconds(), now).Scan(&config, &body, &tp)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
			n.log.Warn("push: claiming a change to deliver failed; trying again", "task", h.key.task, "config", h.key.id, "err", err)
		}
		return c, nil, "", false
	}
	if err := json.Unmarshal(config, &c); err != nil {
		n.log.Error("push: a stored config cannot be read; its change is given up", "task", h.key.task, "config", h.key.id, "err", err)
		if _, err := n.store.Pool().Exec(ctx, `DELETE FROM push_outbox WHERE seq = $1`, h.seq); err != nil {
			n.log.Warn("push: removing a change that cannot be delivered failed; it is read again", "task", h.key.task, "err", err)
		}
		return c, nil, "", false
	}
	return c, body, tp, true
}

// settle records the end of a post: the change deleted when it was delivered or given up, else put
// back for a later try. A settle that cannot be written leaves the claim to lapse: the change is then
// posted again (at least once).
func (n *Notifier) settle(ctx context.Context, d *deliveries, r result) {
	delete(d.inflight, r.key)
	d.callers[r.caller]--
	l := lane{r.caller, hostOf(r.url)}
	d.hosts[l]--
	if d.callers[r.caller] <= 0 {
		delete(d.callers, r.caller)
	}
	if d.hosts[l] <= 0 {
		delete(d.hosts, l)
	}
	outcome := "ok"
	var err error
	switch attempts := r.attempts + 1; {
	case r.err == nil:
		_, err = n.store.Pool().Exec(ctx, `DELETE FROM push_outbox WHERE seq = $1 AND claimed_by = $2`, r.seq, n.me)
	case attempts >= n.cfg.Push.MaxAttempts:
		outcome = "gave_up"
		n.log.Warn("push: a notification was given up", "task", r.key.task, "config", r.key.id, "attempts", attempts, "err", r.err)
		_, err = n.store.Pool().Exec(ctx, `DELETE FROM push_outbox WHERE seq = $1 AND claimed_by = $2`, r.seq, n.me)
	default:
		outcome = "retry"
		wait := n.cfg.Push.Backoff << min(attempts-1, 30)
		if wait <= 0 || wait > n.cfg.Push.MaxBackoff {
			wait = n.cfg.Push.MaxBackoff
		}
		wait += time.Duration(rand.Int64N(int64(wait)/4 + 1)) // as push's: webhooks that failed together are not retried together
		n.log.Debug("push: a notification failed; trying again", "task", r.key.task, "config", r.key.id, "in", wait, "err", r.err)
		_, err = n.store.Pool().Exec(ctx, `UPDATE push_outbox SET attempts = $3, due = $4, claimed_by = '', claimed_until = 0
			WHERE seq = $1 AND claimed_by = $2`, r.seq, n.me, attempts, n.cfg.Now().Add(wait).UnixMilli())
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("push: recording a delivery failed; its claim lapses and it is posted again", "task", r.key.task, "config", r.key.id, "err", err)
	}
	if fn := n.cfg.Push.Delivered; fn != nil {
		fn(outcome)
	}
}

// listen wakes the run goroutine for each notification on channel murmur_push (the trigger's: a change
// was queued), on a connection of its own, until ctx ends; a lost connection is made again after a
// second, the Poll covering what was told meanwhile.
func (n *Notifier) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.log.Debug("push: listening for queued changes failed; listening again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (n *Notifier) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN murmur_push`); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		n.wake()
	}
}
