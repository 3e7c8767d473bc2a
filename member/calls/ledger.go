package calls

import (
	"slices"
	"sync"

	"github.com/murmur-run/murmur/member/records"
)

// Mark is what a Ledger keeps of every entry: whether it ended, whether its outcome reached the model,
// and whether its record was written. An entry type embeds it; its fields are guarded by the ledger's
// lock.
type Mark struct {
	ended     bool
	delivered bool
	recorded  bool
}

func (m *Mark) mark() *Mark { return m }

// Delivered reports whether the entry's outcome reached the model; read it with the ledger's lock held
// (in LedgerConfig.Fields).
func (m *Mark) Delivered() bool { return m.delivered }

// entry is an entry type of a Ledger: a pointer to a struct that embeds Mark.
type entry interface{ mark() *Mark }

// LedgerConfig is what a ledger is given: how its entries' records are written and who hears of an end.
type LedgerConfig[E entry] struct {
	Task   string       // the calling task, whose records these are
	Type   records.Type // the record written once per entry: member_call, delegation
	Record records.WriteFunc
	// Fields is an entry's record; it runs with the ledger's lock held.
	Fields func(E) map[string]any
	// Ended, when set, is told of each entry's end, outside the lock (metrics).
	Ended func(E)
}

// Ledger is the bookkeeping a task's member calls (Tracker) and its delegations (delegate.Tracker)
// share: the entries in the order they were made, each ended once, delivered to the model in rounds,
// and recorded once when accounted for. Pending's channel is closed at each end.
//
// A Ledger is safe for concurrent use; its lock also guards what the tracker keeps with each entry.
type Ledger[E entry] struct {
	cfg     LedgerConfig[E]
	mu      sync.Mutex
	list    []E
	changed chan struct{}
}

// NewLedger returns an empty ledger.
func NewLedger[E entry](cfg LedgerConfig[E]) *Ledger[E] {
	return &Ledger[E]{cfg: cfg, changed: make(chan struct{})}
}

// Task is the calling task.
func (l *Ledger[E]) Task() string { return l.cfg.Task }

// Add appends e.
func (l *Ledger[E]) Add(e E) {
	l.mu.Lock()
	l.list = append(l.list, e)
	l.mu.Unlock()
}

// End ends e unless it has ended already: set fills in its outcome with the lock held. One that ended in
// its own tool call is delivered, and recorded, at once.
func (l *Ledger[E]) End(e E, inToolCall bool, set func()) {
	l.mu.Lock()
	m := e.mark()
	if m.ended {
		l.mu.Unlock()
		return
	}
	m.ended = true
	set()
	if inToolCall {
		m.delivered = true
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	if l.cfg.Ended != nil {
		l.cfg.Ended(e)
	}
	if inToolCall {
		l.Record(e)
	}
}

// Record writes e's record once it is accounted for; later calls do nothing.
func (l *Ledger[E]) Record(e E) {
	l.mu.Lock()
	m := e.mark()
	if m.recorded {
		l.mu.Unlock()
		return
	}
	m.recorded = true
	rec := l.cfg.Fields(e)
	l.mu.Unlock()
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = l.cfg.Record(l.cfg.Type, l.cfg.Task, rec)
}

// Pending returns the entries still out and those ended but not yet delivered, and a channel closed at
// the next end.
func (l *Ledger[E]) Pending() (out, undelivered int, changed chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.list {
		switch m := e.mark(); {
		case !m.ended:
			out++
		case !m.delivered:
			undelivered++
		}
	}
	return out, undelivered, l.changed
}

// Round takes the ended, undelivered entries, in the order they were made, marks them delivered and
// records them; ended is every entry that had ended at that instant, in the same order. Neither list
// changes after it is returned: an ended entry's outcome is fixed.
func (l *Ledger[E]) Round() (taken, ended []E) {
	l.mu.Lock()
	for _, e := range l.list {
		m := e.mark()
		if !m.ended {
			continue
		}
		ended = append(ended, e)
		if !m.delivered {
			m.delivered = true
			taken = append(taken, e)
		}
	}
	l.mu.Unlock()
	for _, e := range taken {
		l.Record(e)
	}
	return taken, ended
}

// Ended returns every entry that has ended, in the order they were made.
func (l *Ledger[E]) Ended() []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []E
	for _, e := range l.list {
		if e.mark().ended {
			out = append(out, e)
		}
	}
	return out
}

// Close ends every entry still out (abandon fills in its outcome, with the lock held) and records every
// entry not yet recorded, delivered or not: the end of the task's attempt, once its goroutines stopped.
func (l *Ledger[E]) Close(abandon func(E)) {
	l.mu.Lock()
	list := slices.Clone(l.list)
	l.mu.Unlock()
	for _, e := range list {
		l.End(e, false, func() { abandon(e) })
		l.Record(e)
	}
}
