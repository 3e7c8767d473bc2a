package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"

	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Feed streams tasks from the events a shared store keeps (store.EventLog), for a member on several
// replicas (DESIGN §16): a stream on any replica gets the task as committed, then every later event
// once, in the order of its numbers, whichever replica runs the task, and a client that comes back with
// the number of the last event it had (Resume) gets the events after it. Its Hub still tells the
// session's observers (push) of the changes this replica publishes.
//
// A Feed learns that a task has new events when Poke is called: on each notice of a committed change
// (member/replica) and on the replica's poll (PokeAll), which covers a lost notice. Each watched task
// has one reader of the store at a time, which sends what it read to every subscriber that has not had
// it: a subscriber is never sent an event twice, nor one its first answer already showed.
type Feed struct {
	*Hub
	log    store.EventLog
	logger *slog.Logger
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	topics  map[a2a.TaskID]*feedTopic
	running map[a2a.TaskID]string // the context of each task this replica published unended: Progress's
	closed  bool
}

// feedTopic is one watched task of a Feed.
type feedTopic struct {
	subscribers
	latest  json.RawMessage // the task as of its event seq
	seq     int64
	final   bool // latest is in a terminal state
	reading bool // a reader runs
	again   bool // poked while it ran: read once more
}

// NewFeed returns a Feed of the events log keeps, publishing to hub's observers. Close it.
func NewFeed(hub *Hub, log store.EventLog, logger *slog.Logger) *Feed {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Feed{Hub: hub, log: log, logger: logger, ctx: ctx, stop: stop,
		topics: map[a2a.TaskID]*feedTopic{}, running: map[a2a.TaskID]string{}}
}

// Publish tells the hub's observers of a change this replica stored. Streams learn of it from the
// store, once it is committed (Poke).
func (f *Feed) Publish(t *a2a.Task) {
	f.mu.Lock()
	if t.Status.State.Terminal() {
		delete(f.running, t.ID)
	} else {
		f.running[t.ID] = t.ContextID
	}
	f.mu.Unlock()
	f.Hub.Publish(t)
}

// Progress keeps the running task's transient progress among its events (store.EventLog's Note), as a
// statusUpdate in the working state with text as its message: unlike a Hub's, it reaches the task's
// streams on every replica, and a stream that resumes after it.
func (f *Feed) Progress(id a2a.TaskID, text string, meta map[string]any) {
	f.mu.Lock()
	contextID, ok := f.running[id]
	f.mu.Unlock()
	if !ok {
		return
	}
	msg := &a2a.Message{
		MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())),
		Role:      a2a.RoleAgent,
		Parts:     []a2a.Part{a2a.TextPart(text)},
		TaskID:    id,
		ContextID: contextID,
		Metadata:  meta,
	}
	ev, err := json.Marshal(a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{
		TaskID: id, ContextID: contextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: msg, Timestamp: a2a.NewTimestamp(f.cfg.Now())}}})
	if err == nil {
		f.log.Note(id, ev)
	}
}

// Subscribe subscribes to task id: it returns the task as committed and a subscription to the events
// after it. load is not used: the task is read with its event number from the store, in one snapshot.
// For a task in a terminal state the subscription's channel is closed at once.
func (f *Feed) Subscribe(id a2a.TaskID, _ func() ([]byte, error)) (json.RawMessage, *Subscription, error) {
	f.mu.Lock()
	if tp := f.topics[id]; tp != nil && !tp.final && !f.closed {
		s := tp.subscribe(f, f.cfg.Buffer, tp.seq)
		f.mu.Unlock()
		return tp.latest, s, nil
	}
	f.mu.Unlock()
	got, err := f.log.Follow(f.ctx, id, math.MaxInt64)
	if err != nil {
		return nil, nil, err
	}
	if got.State.Terminal() {
		return got.Task, endedSubscription(got.Seq), nil
	}
	s, err := f.join(id, got, got.Seq)
	if err != nil {
		return nil, nil, err
	}
	return got.Task, s, nil
}

// Resume subscribes to the events of task id after the one numbered after: what a client that had it
// (an SSE Last-Event-ID) missed, then what follows. Its channel closes after the task's last event.
func (f *Feed) Resume(ctx context.Context, id a2a.TaskID, after int64) (*Subscription, error) {
	got, err := f.log.Follow(ctx, id, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	after = max(0, min(after, got.Seq))
	if got.State.Terminal() && after == got.Seq {
		return endedSubscription(after), nil
	}
	return f.join(id, got, after)
}

// join adds a subscriber that has had the events up to from to the topic of task id, made from got
// (read from the store) when nobody watches the task yet, and reads the store for it when the topic is
// further on than it.
func (f *Feed) join(id a2a.TaskID, got store.Followed, from int64) (*Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, a2a.ErrInternal.With("the member's streams are closed: it is shutting down")
	}
	tp := f.topics[id]
	if tp == nil {
		tp = &feedTopic{subscribers: newSubscribers(id)}
		f.topics[id] = tp
	}
	moved := got.Seq > tp.seq
	if moved || tp.latest == nil {
		tp.latest, tp.seq, tp.final = got.Task, got.Seq, got.State.Terminal()
	}
	s := tp.subscribe(f, f.cfg.Buffer, from)
	if from < tp.seq || moved {
		// This subscriber, or those before it, lack events the topic's task already has.
		f.readLocked(tp)
	}
	return s, nil
}

// Poke tells the feed that task id may have new events: its streams read them.
func (f *Feed) Poke(id a2a.TaskID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tp := f.topics[id]; tp != nil {
		f.readLocked(tp)
	}
}

// PokeAll is Poke of every watched task: a notice may have been lost.
func (f *Feed) PokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tp := range f.topics {
		f.readLocked(tp)
	}
}

// Subscribers returns how many subscriptions task id has.
func (f *Feed) Subscribers(id a2a.TaskID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countLocked(f.topics, id)
}

// Close ends every subscription and waits for the readers. Safe to call more than once.
func (f *Feed) Close() {
	f.stop()
	f.mu.Lock()
	f.closed = true
	for _, tp := range f.topics {
		for s := range tp.subs {
			endLocked(f.topics, s, nil)
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// readLocked starts tp's reader, or asks the running one to read once more. f.mu is held.
func (f *Feed) readLocked(tp *feedTopic) {
	if f.closed {
		return
	}
	if tp.reading {
		tp.again = true
		return
	}
	tp.reading = true
	f.wg.Go(func() { f.read(tp) })
}

// read reads tp's events after the earliest its subscribers lack and sends each to those that lack it,
// until nothing more was asked of it while it read.
func (f *Feed) read(tp *feedTopic) {
	f.mu.Lock()
	for {
		tp.again = false
		after := tp.seq
		for s := range tp.subs {
			after = min(after, s.from)
		}
		f.mu.Unlock()
		got, err := f.log.Follow(f.ctx, tp.id, after)
		f.mu.Lock()
		var dropped int
		switch {
		case f.ctx.Err() != nil:
		case err != nil:
			// Read again on the next poke (the replica's poll pokes every watched task); a task that
			// is gone (retention) has nothing more to stream.
			f.logger.Warn("reading a task's events for its streams", "task", tp.id, "err", err)
			if errors.Is(err, store.ErrNotFound) {
				for s := range tp.subs {
					endLocked(f.topics, s, nil)
				}
			}
		default:
			dropped = f.sendLocked(tp, got)
		}
		if dropped > 0 {
			f.mu.Unlock()
			f.reportDropped(dropped)
			f.mu.Lock()
		}
		if len(tp.subs) == 0 || !tp.again || f.closed {
			tp.reading = false
			f.mu.Unlock()
			return
		}
	}
}

// sendLocked sends got's events to the subscribers of tp that lack them, and ends those that had the
// last event of an ended task. f.mu is held.
func (f *Feed) sendLocked(tp *feedTopic, got store.Followed) (dropped int) {
	if got.Seq >= tp.seq {
		tp.latest, tp.seq, tp.final = got.Task, got.Seq, got.State.Terminal()
	}
	for _, ev := range got.Events {
		e := Event{Result: ev.Event, Seq: ev.Seq, Final: tp.final && ev.Seq == tp.seq}
		for s := range tp.subs {
			if s.from >= ev.Seq {
				continue
			}
			switch sent, slow := offerLocked(f.topics, s, e); {
			case sent:
				s.from = ev.Seq
			case slow:
				dropped++
			}
		}
	}
	if tp.final {
		for s := range tp.subs {
			if s.from >= tp.seq {
				endLocked(f.topics, s, nil)
			}
		}
	}
	return dropped
}

// close is Subscription.Close of a Feed's subscription.
func (f *Feed) close(s *Subscription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	endLocked(f.topics, s, nil)
}

// Tell is Poke of the task a notice of the store names, and PokeAll after a Resync: what a replica's
// coordinator is given (replica.Config.Told).
func (f *Feed) Tell(n store.Notice) {
	if n.Resync {
		f.PokeAll()
		return
	}
	f.Poke(n.ID)
}
