package events

import "github.com/murmur-run/murmur/a2a"

// Subscription is one subscriber's view of one task.
type Subscription struct {
	owner owner        // the Hub or Feed it is of; nil for a task that had ended when it was made
	set   *subscribers // its task's subscriptions in owner
	ch    chan Event
	err   error // set before ch is closed

	// A Feed's subscription.
	start int64 // the number of the last event its first answer covered
	from  int64 // the number of the last event it was sent
}

// Start is the number of the last event of the task as the subscription's first answer showed it (a
// Feed's): its events come after it. 0 for a Hub's, which numbers none.
func (s *Subscription) Start() int64 { return s.start }

// Events returns the subscription's channel. It is closed when the task ends, when the subscriber was
// too slow (see Err), or after Close.
func (s *Subscription) Events() <-chan Event { return s.ch }

// Err returns why the channel closed: nil at the task's end or after Close, ErrSlowSubscriber when the
// subscriber fell behind. Read it only after the channel is closed.
func (s *Subscription) Err() error { return s.err }

// Close ends the subscription; its channel closes. Safe to call more than once.
func (s *Subscription) Close() {
	if s.owner != nil {
		s.owner.close(s)
	}
}

// endedSubscription is a subscription to a task that has ended: its channel is closed already. start
// is the number of the task's last event (a Feed's; 0 for a Hub's).
func endedSubscription(start int64) *Subscription {
	s := &Subscription{ch: make(chan Event), start: start, from: start}
	close(s.ch)
	return s
}

// owner is what subscriptions are of, a Hub or a Feed: close ends one under the owner's lock.
type owner interface {
	close(s *Subscription)
}

// subscribers is the subscriptions of one watched task: the bookkeeping a Hub's topic and a Feed's
// share (both embed it). The lock of the Hub or Feed that keeps the topic guards it.
type subscribers struct {
	id   a2a.TaskID
	subs map[*Subscription]struct{}
}

func newSubscribers(id a2a.TaskID) subscribers {
	return subscribers{id: id, subs: map[*Subscription]struct{}{}}
}

// watchers returns ss: what a topic embedding it answers to endLocked and countLocked.
func (ss *subscribers) watchers() *subscribers { return ss }

// subscribe adds a subscription of o to ss's task, with a buffer of that many events, that has had
// the task's events up to from (a Feed's; 0 for a Hub's).
func (ss *subscribers) subscribe(o owner, buffer int, from int64) *Subscription {
	s := &Subscription{owner: o, set: ss, ch: make(chan Event, buffer), start: from, from: from}
	ss.subs[s] = struct{}{}
	return s
}

// watched is a topic of a Hub or of a Feed: a task with its subscribers.
type watched interface {
	watchers() *subscribers
}

// endLocked takes s off its task's subscribers and closes its channel, err being its Err, and takes the
// task out of topics once nobody watches it. It reports false when s had ended already. The lock of the
// owner of topics is held.
func endLocked[T watched](topics map[a2a.TaskID]T, s *Subscription, err error) bool {
	ss := s.set
	if ss == nil {
		return false
	}
	if _, ok := ss.subs[s]; !ok {
		return false
	}
	delete(ss.subs, s)
	s.err = err
	close(s.ch)
	if tp, ok := topics[ss.id]; ok && len(ss.subs) == 0 && tp.watchers() == ss {
		delete(topics, ss.id)
	}
	return true
}

// offerLocked hands ev to s when its buffer has room (sent); otherwise it ends s as too slow
// (ErrSlowSubscriber), and slow reports that this call dropped it. The lock of the owner of topics is
// held.
func offerLocked[T watched](topics map[a2a.TaskID]T, s *Subscription, ev Event) (sent, slow bool) {
	select {
	case s.ch <- ev:
		return true, false
	default:
		return false, endLocked(topics, s, ErrSlowSubscriber)
	}
}

// countLocked is how many subscriptions task id has in topics. The lock of the owner of topics is held.
func countLocked[T watched](topics map[a2a.TaskID]T, id a2a.TaskID) int {
	if tp, ok := topics[id]; ok {
		return len(tp.watchers().subs)
	}
	return 0
}
