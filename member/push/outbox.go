package push

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// flushEvery is how many delivered changes may wait to be deleted from the outbox while deliveries go on.
const flushEvery = 64

// waitingConfig is a config as enqueue sees it: the status it last queued and how many changes it has
// waiting.
type waitingConfig struct {
	k       configKey
	queued  sql.NullString
	waiting int
}

// configsOf reads the configs of a task (all: id "") or one config, for enqueue.
func (n *Notifier) configsOf(ctx context.Context, tx *sql.Tx, task a2a.TaskID, id string) ([]waitingConfig, error) {
	st, err := n.stmt(ctx, tx, qConfigsOf)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, string(task), id, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []waitingConfig
	for rows.Next() {
		c := waitingConfig{k: configKey{task: task}}
		if err := rows.Scan(&c.k.id, &c.queued, &c.waiting); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// enqueue puts a change of status key status (body: what to post; tp: the task's traceparent) in the
// outbox of config c, in tx, unless the config has it already or has queued its task's end. A full
// outbox gives up its newest waiting change for it.
func (n *Notifier) enqueue(ctx context.Context, tx *sql.Tx, c waitingConfig, status string, body []byte, tp string) error {
	if c.queued.Valid && (c.queued.String == status || keyState(c.queued.String).Terminal()) {
		return nil
	}
	if over := c.waiting - n.cfg.Outbox + 1; over > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM push_outbox WHERE seq IN (SELECT seq FROM push_outbox WHERE task_id = ? AND config_id = ? ORDER BY seq DESC LIMIT ?)`,
			string(c.k.task), c.k.id, over); err != nil {
			return err
		}
		n.log.Warn("push: a webhook's outbox is full; its newest waiting change gives way to the latest", "task", c.k.task, "config", c.k.id, "outbox", n.cfg.Outbox)
		for range over {
			n.report(n.cfg.Dropped)
		}
	}
	insert, err := n.stmt(ctx, tx, qInsert)
	if err != nil {
		return err
	}
	if _, err := insert.ExecContext(ctx, string(c.k.task), c.k.id, status, string(body), time.Now().UnixMilli(), tp); err != nil {
		return err
	}
	update, err := n.stmt(ctx, tx, qQueued)
	if err != nil {
		return err
	}
	_, err = update.ExecContext(ctx, status, string(c.k.task), c.k.id)
	return err
}

// enqueueOne is enqueue for one config, read first.
func (n *Notifier) enqueueOne(ctx context.Context, tx *sql.Tx, k configKey, status string, body []byte, tp string) error {
	cs, err := n.configsOf(ctx, tx, k.task, k.id)
	if err != nil || len(cs) == 0 {
		return err // none: deleted meanwhile
	}
	return n.enqueue(ctx, tx, cs[0], status, body, tp)
}

// traceOf reads, in tx, the traceparent the task store keeps with task (that of the request that sent
// it): "" when it keeps none, or when its file is of before the column.
func (n *Notifier) traceOf(ctx context.Context, tx *sql.Tx, task a2a.TaskID) (string, error) {
	if !n.traced {
		return "", nil
	}
	st, err := n.stmt(ctx, tx, qTrace)
	if err != nil {
		return "", err
	}
	var tp string
	if err := st.QueryRowContext(ctx, string(task)).Scan(&tp); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	return tp, nil
}

// write puts the observed changes in the outbox of their tasks' configs, in one transaction.
func (n *Notifier) write(ctx context.Context, batch []change) error {
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, c := range batch {
		cs, err := n.configsOf(ctx, tx, c.task, "")
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			continue
		}
		if c.body == nil { // the observer had no task: post it as stored now
			var task string
			if err := tx.QueryRowContext(ctx, `SELECT task FROM tasks WHERE id = ?`, string(c.task)).Scan(&task); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				return err
			}
			var t a2a.Task
			if err := json.Unmarshal([]byte(task), &t); err != nil {
				return err
			}
			if c.body, err = PostBody(&t); err != nil {
				return err
			}
			c.key = statusKey(t.Status)
		}
		tp, err := n.traceOf(ctx, tx, c.task)
		if err != nil {
			return err
		}
		for _, wc := range cs {
			if err := n.enqueue(ctx, tx, wc, c.key, c.body, tp); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// reconcile puts in the outbox the stored status of every task whose configs have not queued it (only
// the ended tasks' when ended): the changes stored while the member was down, or dropped from a full
// queue, or stored by a writer that reports to no hub (the store's recovery).
func (n *Notifier) reconcile(ctx context.Context, ended bool) error {
	rows, err := n.db.QueryContext(ctx, `SELECT p.task_id, p.id, `+sqlStatusKey+`, t.task
		FROM push_configs p JOIN tasks t ON t.id = p.task_id WHERE p.queued IS NOT (`+sqlStatusKey+`)`)
	if err != nil {
		return err
	}
	type stale struct {
		k         configKey
		key, task string
	}
	var todo []stale
	for rows.Next() {
		var s stale
		var task string
		if err := rows.Scan(&task, &s.k.id, &s.key, &s.task); err != nil {
			rows.Close()
			return err
		}
		s.k.task = a2a.TaskID(task)
		if !ended || keyState(s.key).Terminal() {
			todo = append(todo, s)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(todo) == 0 {
		return err
	}
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, s := range todo {
		var t a2a.Task
		if err := json.Unmarshal([]byte(s.task), &t); err != nil {
			return err
		}
		body, err := PostBody(&t)
		if err != nil {
			return err
		}
		tp, err := n.traceOf(ctx, tx, s.k.task)
		if err != nil {
			return err
		}
		if err := n.enqueueOne(ctx, tx, s.k, s.key, body, tp); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// head is the oldest waiting change of a config: the one its webhook gets next, with the slots its
// delivery takes: its caller's and its caller's to its webhook's host.
type head struct {
	seq            int64
	k              configKey
	caller, sendTo *slots
}

// slots counts the deliveries in flight of one caller, or of one caller to one host.
type slots struct{ busy int }

// lane is a caller and a webhook host.
type lane struct {
	caller, host string
}

// slotsOf returns the slots of caller and of caller's posts to rawURL's host. An entry lives while a
// head or a delivery holds it: refresh drops the idle ones.
func (d *dispatch) slotsOf(caller, rawURL string) (*slots, *slots) {
	l := lane{caller: caller}
	if u, err := url.Parse(rawURL); err == nil {
		l.host = strings.ToLower(u.Host)
	}
	c, h := d.callers[caller], d.hosts[l]
	if c == nil {
		c = &slots{}
		d.callers[caller] = c
	}
	if h == nil {
		h = &slots{}
		d.hosts[l] = h
	}
	return c, h
}

// result is the end of one delivery.
type result struct {
	head
	err     error
	closing bool
}

type failure struct {
	seq      int64 // the change whose delivery failed
	attempts int
	next     time.Time
}

// dispatch is the run goroutine's own state.
type dispatch struct {
	ready    []head // heads to start, oldest first; those without a free slot keep their place
	inflight map[configKey]bool
	callers  map[string]*slots // the slots of each caller with a head or a delivery
	hosts    map[lane]*slots   // the slots of each caller's posts to one host
	failures map[configKey]failure
	done     []head // delivered (or given up), not yet deleted from the outbox
	fresh    []head // delivered (or given up) since the last step: their configs' next changes are due
	sweep    bool
}

// run writes observed changes to the outbox and delivers it until Close. Deliveries of one config are
// made one at a time in the order of its changes; each caller's configs are delivered to up to
// PerCaller at once, up to PerReceiver of them to one host, whatever other callers' webhooks do.
func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	// A sweep now and then is the safety net of a change that reached no observer.
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	d := &dispatch{inflight: map[configKey]bool{}, failures: map[configKey]failure{},
		callers: map[string]*slots{}, hosts: map[lane]*slots{}}
	for {
		full := false
		select {
		case <-ctx.Done():
			n.finish(d)
			return
		case <-n.kick:
			n.mu.Lock()
			full, n.stale = n.stale, false
			n.mu.Unlock()
		case r := <-n.results:
			n.settle(d, r)
		case <-sweep.C:
			d.sweep, full = true, true
		}
		n.step(ctx, d, full)
	}
}

// step takes in the ended deliveries and the observed changes, and starts what is ready.
func (n *Notifier) step(ctx context.Context, d *dispatch, full bool) {
	for more := true; more; {
		select {
		case r := <-n.results:
			n.settle(d, r)
		default:
			more = false
		}
	}
	if n.writeChanges(ctx) {
		full = true
	}
	n.mu.Lock()
	all := n.overflow
	n.overflow = false
	n.mu.Unlock()
	if all || d.sweep {
		if err := n.reconcile(ctx, !all); err != nil {
			n.failed(ctx, "comparing the configs with their tasks", err)
			n.mu.Lock()
			n.overflow = n.overflow || all
			n.mu.Unlock()
		}
		d.sweep, full = false, true
	}
	if full {
		d.fresh = d.fresh[:0] // the refresh finds their next changes
	} else {
		n.advance(ctx, d)
	}
	if full || len(d.done) >= flushEvery || (len(d.inflight) == 0 && len(d.ready) == 0) {
		n.flush(ctx, d)
	}
	if full {
		if err := n.refresh(ctx, d); err != nil {
			n.failed(ctx, "reading the outbox", err)
		}
	}
	n.startReady(ctx, d)
}

// startReady starts, oldest first, the ready heads whose caller, and whose caller's posts to their host,
// have a slot free; the others keep their place. So one caller's webhooks that hang hold that caller's
// slots only, and one host that hangs half of them.
func (n *Notifier) startReady(ctx context.Context, d *dispatch) {
	kept := d.ready[:0]
	for _, h := range d.ready {
		switch {
		case d.inflight[h.k]:
			// its config's delivery in flight: its end makes the next change ready
		case h.caller.busy >= PerCaller || h.sendTo.busy >= PerReceiver:
			kept = append(kept, h)
		default:
			n.start(ctx, d, h)
		}
	}
	clear(d.ready[len(kept):])
	d.ready = kept
}

// failed logs an error of the outbox and tries again after a backoff.
func (n *Notifier) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	n.log.Error("push: "+what, "err", err)
	n.retryAt(time.Now().Add(n.cfg.Backoff))
}

// writeChanges writes the changes observed so far to the outbox; it reports whether there were any.
func (n *Notifier) writeChanges(ctx context.Context) bool {
	var batch []change
	for more := true; more; {
		select {
		case c := <-n.changes:
			batch = append(batch, c)
		default:
			more = false
		}
	}
	if len(batch) == 0 {
		return false
	}
	if err := n.write(ctx, batch); err != nil {
		if ctx.Err() != nil {
			ctx = context.Background() // closing: the changes are written all the same
			err = n.write(ctx, batch)
		}
		if err != nil {
			n.failed(ctx, "writing changes to the outbox; comparing every config with its task instead", err)
			n.mu.Lock()
			n.overflow = true
			n.mu.Unlock()
		}
	}
	return true
}

// settle takes in one ended delivery.
func (n *Notifier) settle(d *dispatch, r result) {
	delete(d.inflight, r.k)
	r.caller.busy--
	r.sendTo.busy--
	if r.closing {
		return // not made: it stays waiting for the next Open
	}
	if r.err == nil {
		n.delivered("ok")
		delete(d.failures, r.k)
		d.done = append(d.done, r.head)
		d.fresh = append(d.fresh, r.head)
		return
	}
	f := d.failures[r.k]
	if f.seq != r.seq {
		f = failure{seq: r.seq}
	}
	f.attempts++
	if f.attempts >= n.cfg.MaxAttempts || errors.Is(r.err, ErrNotAllowed) {
		n.log.Warn("push: giving up a delivery", "task", r.k.task, "config", r.k.id, "attempts", f.attempts, "err", r.err)
		n.delivered("gave_up")
		delete(d.failures, r.k)
		d.done = append(d.done, r.head)
		d.fresh = append(d.fresh, r.head)
		return
	}
	wait := min(n.cfg.Backoff<<(f.attempts-1), n.cfg.MaxBackoff)
	wait += time.Duration(rand.Int64N(int64(wait)/4 + 1))
	f.next = time.Now().Add(wait)
	d.failures[r.k] = f
	n.log.Info("push: delivery failed; will retry", "task", r.k.task, "config", r.k.id, "attempt", f.attempts, "in", wait, "err", r.err)
	n.delivered("retry")
	n.retryAt(f.next)
}

func (n *Notifier) delivered(outcome string) {
	if n.cfg.Delivered != nil {
		n.cfg.Delivered(outcome)
	}
}

// flush deletes the delivered changes from the outbox, in one transaction. It runs while the notifier
// closes too: those deliveries were made.
func (n *Notifier) flush(ctx context.Context, d *dispatch) {
	if len(d.done) == 0 {
		return
	}
	done := d.done
	d.done = nil
	tx, err := n.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err == nil {
		defer tx.Rollback()
		for chunk := range slices.Chunk(done, 500) {
			marks := make([]string, len(chunk))
			args := make([]any, len(chunk))
			for i, h := range chunk {
				marks[i], args[i] = "?", h.seq
			}
			if _, err = tx.Exec(`DELETE FROM push_outbox WHERE seq IN (`+strings.Join(marks, ",")+`)`, args...); err != nil {
				break
			}
		}
		if err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		n.log.Error("push: deleting delivered changes from the outbox; they will be delivered again", "changes", len(done), "err", err)
	}
}

// advance makes ready the next change of each config just delivered to (its delivered change may still
// be in the outbox: the next is the one after it).
func (n *Notifier) advance(ctx context.Context, d *dispatch) {
	for _, h := range d.fresh {
		if d.inflight[h.k] || slices.ContainsFunc(d.ready, func(r head) bool { return r.k == h.k }) {
			continue
		}
		next := head{k: h.k}
		var caller, hook string
		st, err := n.stmt(ctx, nil, qNext)
		if err == nil {
			err = st.QueryRowContext(ctx, string(h.k.task), h.k.id, h.seq).Scan(&next.seq, &caller, &hook)
		}
		switch {
		case err == nil:
			next.caller, next.sendTo = d.slotsOf(caller, hook)
			d.ready = append(d.ready, next)
		case !errors.Is(err, sql.ErrNoRows):
			n.failed(ctx, "reading the outbox", err)
		}
	}
	d.fresh = d.fresh[:0]
}

// refresh reads every config's oldest waiting change, and makes ready those not being delivered and not
// waiting for a retry.
func (n *Notifier) refresh(ctx context.Context, d *dispatch) error {
	rows, err := n.db.QueryContext(ctx, `SELECT h.seq, h.task_id, h.config_id, p.caller, coalesce(json_extract(p.config, '$.url'), '')
		FROM (SELECT min(seq) AS seq, task_id, config_id FROM push_outbox GROUP BY task_id, config_id) h
		JOIN push_configs p ON p.task_id = h.task_id AND p.id = h.config_id ORDER BY h.seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	now := time.Now()
	seen := map[configKey]bool{}
	d.ready = d.ready[:0]
	maps.DeleteFunc(d.callers, func(_ string, s *slots) bool { return s.busy == 0 })
	maps.DeleteFunc(d.hosts, func(_ lane, s *slots) bool { return s.busy == 0 })
	for rows.Next() {
		var h head
		var task, caller, hook string
		if err := rows.Scan(&h.seq, &task, &h.k.id, &caller, &hook); err != nil {
			return err
		}
		h.k.task = a2a.TaskID(task)
		h.caller, h.sendTo = d.slotsOf(caller, hook)
		seen[h.k] = true
		if d.inflight[h.k] {
			continue
		}
		if f, ok := d.failures[h.k]; ok && f.seq == h.seq && f.next.After(now) {
			n.retryAt(f.next)
			continue
		}
		d.ready = append(d.ready, h)
	}
	for k := range d.failures {
		if !seen[k] {
			delete(d.failures, k) // its config is gone
		}
	}
	return rows.Err()
}

// start delivers h in a goroutine of its own, which reports to n.results.
func (n *Notifier) start(ctx context.Context, d *dispatch, h head) {
	var body, config, tp string
	st, err := n.stmt(ctx, nil, qBody)
	if err == nil {
		err = st.QueryRowContext(ctx, h.seq).Scan(&body, &config, &tp)
	}
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			n.failed(ctx, "reading a change from the outbox", err)
		}
		return
	}
	var c a2a.TaskPushNotificationConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		n.failed(ctx, "reading a push notification config", err)
		return
	}
	d.inflight[h.k] = true
	h.caller.busy++
	h.sendTo.busy++
	go func() {
		err := Deliver(ctx, n.tracer, n.client, Delivery{Config: c, Body: []byte(body), Traceparent: tp, Member: n.cfg.Member})
		n.results <- result{head: h, err: err, closing: ctx.Err() != nil}
	}()
}

// finish ends run: it waits for the deliveries in flight, then writes what was observed and deletes
// what was delivered.
func (n *Notifier) finish(d *dispatch) {
	for len(d.inflight) > 0 {
		n.settle(d, <-n.results)
	}
	ctx := context.Background()
	n.writeChanges(ctx)
	n.flush(ctx, d)
}

// retryAt makes sure the outbox is read again at t (or earlier).
func (n *Notifier) retryAt(t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.timerAt.IsZero() && !t.Before(n.timerAt) {
		return // the timer wakes the run goroutine before t already
	}
	n.timerAt = t
	d := max(time.Until(t), 0)
	if n.timer == nil {
		n.timer = time.AfterFunc(d, func() {
			n.mu.Lock()
			n.timerAt = time.Time{}
			n.mu.Unlock()
			n.reread()
		})
		return
	}
	n.timer.Reset(d)
}

// reread has the run goroutine read the outbox again: it has changes this goroutine did not write.
func (n *Notifier) reread() {
	n.mu.Lock()
	n.stale = true
	n.mu.Unlock()
	n.wake()
}

// Post sends body to c's URL with client, with c's token (A2A-Notification-Token) and authentication
// (Authorization), and the trace context of ctx (traceparent, tracestate, baggage) when it has one; an
// answer other than 2xx is an error naming its status.
func Post(ctx context.Context, client *http.Client, c a2a.TaskPushNotificationConfig, body []byte) error {
	_, err := post(ctx, client, c, body)
	return err
}

// post is Post, which also returns the answer's status code (0 when none came).
func post(ctx context.Context, client *http.Client, c a2a.TaskPushNotificationConfig, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		conv.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("A2A-Notification-Token", c.Token)
		req.Header.Set("X-A2A-Notification-Token", c.Token)
	}
	if a := c.Authentication; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the webhook answered HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// The statements the outbox runs once per change, prepared by Open (prepareAll): preparing each anew
// cost a fifth of a delivery.
const (
	qConfigsOf = `SELECT p.id, p.queued,
			(SELECT count(*) FROM push_outbox o WHERE o.task_id = p.task_id AND o.config_id = p.id)
		FROM push_configs p WHERE p.task_id = ? AND (? = '' OR p.id = ?) ORDER BY p.created, p.id`
	qInsert = `INSERT INTO push_outbox (task_id, config_id, status, body, created, traceparent) VALUES (?, ?, ?, ?, ?, ?)`
	qQueued = `UPDATE push_configs SET queued = ? WHERE task_id = ? AND id = ?`
	qNext   = `SELECT o.seq, p.caller, coalesce(json_extract(p.config, '$.url'), '') FROM push_outbox o
		JOIN push_configs p ON p.task_id = o.task_id AND p.id = o.config_id
		WHERE o.task_id = ? AND o.config_id = ? AND o.seq > ? ORDER BY o.seq LIMIT 1`
	qBody = `SELECT o.body, p.config, o.traceparent FROM push_outbox o
		JOIN push_configs p ON p.task_id = o.task_id AND p.id = o.config_id WHERE o.seq = ?`
	// qTrace reads the traceparent the task store keeps with a task; prepared only when its tasks table
	// has the column (Notifier.traced).
	qTrace = `SELECT traceparent FROM tasks WHERE id = ?`
)

// prepareAll prepares the outbox's statements on db. It runs before anything else uses db: a statement
// prepared later, inside a transaction, would wait for a second connection that may be waiting for
// the transaction's lock.
func prepareAll(db *sql.DB, traced bool) (map[string]*sql.Stmt, error) {
	out := map[string]*sql.Stmt{}
	qs := []string{qConfigsOf, qInsert, qQueued, qNext, qBody}
	if traced {
		qs = append(qs, qTrace)
	}
	for _, q := range qs {
		st, err := db.Prepare(q)
		if err != nil {
			for _, st := range out {
				st.Close()
			}
			return nil, err
		}
		out[q] = st
	}
	return out, nil
}

// stmt returns the prepared statement of q, for tx when tx is not nil (prepared on tx's connection,
// never on another).
func (n *Notifier) stmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	st := n.stmts[q]
	if st == nil {
		return nil, fmt.Errorf("push: statement not prepared: %.40s", q)
	}
	if tx != nil {
		return tx.StmtContext(ctx, st), nil
	}
	return st, nil
}
