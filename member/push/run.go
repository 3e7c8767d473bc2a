package push

import (
	"context"
	"time"
)

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
