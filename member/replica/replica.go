// Package replica runs one replica of a member among others that share its task store (DESIGN §16):
// it holds the replica's lease, ends the tasks of replicas whose lease lapsed, claims the tasks nobody
// runs when its session has a place, carries cancellations to the replica that runs a task, and tells
// its session's waiters and streams of the changes the others commit.
//
// The store (store.Replicated, PostgreSQL's) does the deciding: one owner per task by FOR UPDATE SKIP
// LOCKED, a replica dead once its lease lapsed, every change told through LISTEN/NOTIFY. A Coordinator
// only reacts to what it is told, and polls for what a lost notification would have told it.
//
// A Side is the session's half (side.go): what a session does on a member's replicas that it does not
// in a member of one process. The session core (package member) holds one and calls it; the Side calls
// back into the session only through the callbacks of its SideConfig, so this package never imports
// member.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// DefaultLease is how long a replica's lease lasts unless renewed: the time after which the others
// take a replica that stopped answering for dead, end its running tasks and run its queued ones.
const DefaultLease = 10 * time.Second

// DefaultPoll is how often a replica looks for unclaimed tasks and lapsed leases without being told:
// what covers a lost notification.
const DefaultPoll = time.Second

// Session is what a Coordinator drives: the member's session on this replica, through its Side.
type Session interface {
	// Adopt queues a task claim takes from the store, if the session has a place for it.
	Adopt(ctx context.Context, claim func(context.Context) (*a2a.Task, error)) (bool, error)
	// Free is how many more tasks the session would take now.
	Free() int
	// Idle reports whether the session runs no task and queues none: only then does it claim one.
	Idle() bool
	// Remote tells the task's waiters and streams of a change another replica committed.
	Remote(ctx context.Context, id a2a.TaskID)
	// Cancel cancels a task the session runs or queues.
	Cancel(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error)
	// Resync wakes every waiter to read its task again.
	Resync()
	// Asks reports whether task id waits for its sender's input here; Asking lists the tasks that do.
	Asks(id a2a.TaskID) bool
	Asking() []a2a.TaskID
	// Deliver hands msg to the question task id waits on, as a follow-up to this replica's door would:
	// waiting is false when it waits on none; err says why msg does not answer it.
	Deliver(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (waiting bool, err error)
}

// Config is what a Coordinator is given.
type Config struct {
	Store store.Replicated
	// Lease is the replica's lease, renewed every third of it; 0 means DefaultLease.
	Lease time.Duration
	// Poll is how often unclaimed tasks and lapsed leases are looked for without a notice; 0 means
	// DefaultPoll.
	Poll time.Duration
	// Told, when set, is told of every notice before the coordinator acts on it, and of a Resync on
	// each poll: what the replica's streams read their tasks' new events on (events.Feed).
	Told func(store.Notice)
	// CanceledText is the status message of a task this replica cancels for a replica that is gone.
	CanceledText string
	// Lost is called, once, when the replica lost its lease (another replica took it for dead, or it
	// could not renew it for a whole lease): the replica must stop taking and running tasks.
	Lost func(error)
	Now  func() time.Time
	Log  *slog.Logger
}

// Coordinator runs a replica's side of the sharing; build it with New, bind it to its session with
// Start, and stop it with Close before the session closes.
type Coordinator struct {
	cfg  Config
	sess Session

	kick    chan struct{} // capacity 1: look for unclaimed tasks now
	stop    context.CancelFunc
	wg      sync.WaitGroup
	lost    sync.Once
	cancels sync.Map // a2a.TaskID → struct{}: cancellations asked of this replica, in progress
	taking  sync.Map // a2a.TaskID → struct{}: forwarded inputs being taken and delivered
	// forwarded: int64 (an input this replica forwarded) → chan struct{}, told when it is answered
	forwarded sync.Map
}

// New returns a Coordinator for the replica whose store cfg.Store is.
func New(cfg Config) *Coordinator {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Lost == nil {
		cfg.Lost = func(error) {}
	}
	if cfg.Told == nil {
		cfg.Told = func(store.Notice) {}
	}
	cfg.Log = cfg.Log.With("replica", cfg.Store.Replica())
	return &Coordinator{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Name is the replica's name.
func (c *Coordinator) Name() string { return c.cfg.Store.Replica() }

// Start writes the replica's first lease and starts its work for sess: renewing the lease, reaping the
// replicas whose lease lapsed, claiming tasks, and listening to the others' changes.
func (c *Coordinator) Start(ctx context.Context, sess Session) error {
	c.sess = sess
	if _, err := c.cfg.Store.Renew(ctx, c.cfg.Lease, sess.Free()); err != nil {
		return fmt.Errorf("replica %s: writing its lease: %w", c.Name(), err)
	}
	run, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.wg.Go(func() { c.renew(run) })
	c.wg.Go(func() { c.claimer(run) })
	c.wg.Go(func() {
		if err := c.cfg.Store.Watch(run, c.notice(run)); err != nil && !errors.Is(err, context.Canceled) {
			c.cfg.Log.Error("listening to the other replicas' changes", "err", err)
		}
	})
	return nil
}

// Close stops the Coordinator's work and waits for it. The lease is left to lapse: the session's Close
// ends the replica's tasks.
func (c *Coordinator) Close() {
	if c.stop != nil {
		c.stop()
		c.wg.Wait()
	}
}

// Offer stores a task this replica has no place for, for another replica to claim (Peers).
func (c *Coordinator) Offer(ctx context.Context, t *a2a.Task, perReplica int) (bool, error) {
	ok, err := c.cfg.Store.Offer(ctx, t, perReplica)
	if ok {
		c.wake()
	}
	return ok, err
}

// Release gives the tasks of ids, queued here and not started, to the other replicas (Peers):
// what a replica that stops gracefully does with its queue.
func (c *Coordinator) Release(ctx context.Context, ids []a2a.TaskID) ([]a2a.TaskID, error) {
	return c.cfg.Store.Release(ctx, ids)
}

// Cancel cancels a task this replica neither runs nor queues (Peers): its owner is asked
// through the store, or, when it has none or a dead one, the task is ended here.
func (c *Coordinator) Cancel(ctx context.Context, id a2a.TaskID) (*a2a.Task, bool, error) {
	_, ended, err := c.cfg.Store.RequestCancel(ctx, id, c.cfg.CanceledText, c.cfg.Now())
	if err != nil || !ended {
		return nil, false, err
	}
	t, err := c.cfg.Store.Get(ctx, id)
	if err != nil {
		return nil, true, err
	}
	c.sess.Remote(ctx, id)
	return t, true, nil
}

func (c *Coordinator) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// renew renews the lease every third of it until ctx ends. A lease another replica reaped, or one not
// renewed for a whole lease, is lost: Lost is called and renewing stops.
func (c *Coordinator) renew(ctx context.Context) {
	every := c.cfg.Lease / 3
	last := c.cfg.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, err := c.cfg.Store.Renew(ctx, c.cfg.Lease, c.sess.Free())
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && held:
			last = c.cfg.Now()
			continue
		case err == nil:
			c.loseLease(fmt.Errorf("replica %s lost its lease: the other replicas took it for dead (it did not renew it within %v) and ended its tasks; restart it", c.Name(), c.cfg.Lease))
			return
		}
		c.cfg.Log.Warn("renewing the replica's lease", "err", err)
		if since := c.cfg.Now().Sub(last); since >= c.cfg.Lease {
			c.loseLease(fmt.Errorf("replica %s could not renew its lease for %v (%v): the other replicas take it for dead and end its tasks; it stops taking work", c.Name(), since.Round(time.Second), err))
			return
		}
	}
}

func (c *Coordinator) loseLease(err error) {
	c.lost.Do(func() {
		c.cfg.Log.Error("the replica lost its lease", "err", err)
		c.cfg.Lost(err)
	})
}

// claimer claims unclaimed tasks while the session has a place: when told (a notice, an offer, a task
// of its own ending) and every Poll, when it also reaps lapsed replicas.
func (c *Coordinator) claimer(ctx context.Context) {
	t := time.NewTicker(c.cfg.Poll)
	defer t.Stop()
	c.reap(ctx)
	for {
		c.claim(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// What a lost notice would have told: lapsed leases, and the waiters read their tasks again.
			c.reap(ctx)
			c.cfg.Told(store.Notice{Resync: true})
			c.sess.Resync()
			c.takeAllInputs(ctx)
		case <-c.kick:
		}
	}
}

// reap ends the tasks of the replicas whose lease lapsed and tells the session's waiters and streams.
// It runs on the poll only: a lease lapses on the clock, not on a notice.
func (c *Coordinator) reap(ctx context.Context) {
	ended, err := c.cfg.Store.Reap(ctx, c.cfg.Now())
	if err != nil && ctx.Err() == nil {
		c.cfg.Log.Warn("ending the tasks of replicas whose lease lapsed", "err", err)
	}
	for _, id := range ended {
		c.cfg.Log.Warn("a replica's lease lapsed: its task was ended failed", "task", id)
		c.sess.Remote(ctx, id)
	}
}

// claim adopts unclaimed tasks while the session has a place for them.
func (c *Coordinator) claim(ctx context.Context) {
	take := func(ctx context.Context) (*a2a.Task, error) {
		ts, err := c.cfg.Store.Claim(ctx, 1)
		if err != nil || len(ts) == 0 {
			return nil, err
		}
		return ts[0], nil
	}
	for c.sess.Idle() && c.sess.Free() > 0 && ctx.Err() == nil {
		ok, err := c.sess.Adopt(ctx, take)
		if err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("claiming a task", "err", err)
		}
		if !ok {
			return
		}
	}
}

// notice returns what Watch calls with each change: a cancellation asked of this replica is carried
// out, a change of another replica's reaches this one's waiters and streams, and a task anyone may
// claim (or a place freed here) wakes the claimer.
func (c *Coordinator) notice(ctx context.Context) func(store.Notice) {
	me := c.Name()
	return func(n store.Notice) {
		c.cfg.Told(n)
		switch {
		case n.Input > 0:
			c.input(ctx, n)
		case n.Resync:
			c.sess.Resync()
			c.wake()
			c.takeAllInputs(ctx)
		case n.Owner == me && n.Cancel && !n.State.Terminal():
			if _, busy := c.cancels.LoadOrStore(n.ID, struct{}{}); busy {
				return
			}
			c.wg.Go(func() {
				defer c.cancels.Delete(n.ID)
				if _, err := c.sess.Cancel(ctx, n.ID, store.OperatorScope()); err != nil && ctx.Err() == nil {
					c.cfg.Log.Warn("canceling a task as another replica asked", "task", n.ID, "err", err)
				}
			})
		case n.Owner == me:
			if n.State.Terminal() {
				c.wake()
			}
		default:
			c.sess.Remote(ctx, n.ID)
			if n.Owner == "" && n.State == a2a.TaskStateSubmitted {
				c.wake()
			}
		}
	}
}
