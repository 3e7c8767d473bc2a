package push

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// flushEvery is how many delivered changes may wait to be deleted from the outbox while deliveries go on.
const flushEvery = 64

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
