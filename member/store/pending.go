package store

import (
	"sync"
	"sync/atomic"

	"github.com/murmur-run/murmur/a2a"
)

// Pending holds, for each task, the newest change handed to a store's writer by UpdateSoon and not yet
// committed, so that the store's reads show the change from the moment it is handed over. The session
// tells a task's streams of a change as soon as it hands it over; a stream opened after that reads the
// task from the store, and must not read it older than the change it was not sent (a stream that began
// with the task SUBMITTED after its WORKING update went out would never see it WORKING). Both stores
// keep one. The zero value is ready to use.
type Pending struct {
	n  atomic.Int64 // entries: reads skip the lock while nothing is pending
	mu sync.Mutex
	m  map[a2a.TaskID]pendingBody
}

type pendingBody struct {
	seq    int64
	caller string
	body   []byte
}

// Put records body (the task's JSON, never modified afterwards) as task id's newest change, the write
// numbered seq in the order the store's writes are handed over. The caller hands the write over in the
// same critical section, so that seq orders Put as it orders the writes.
func (p *Pending) Put(id a2a.TaskID, seq int64, caller string, body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[a2a.TaskID]pendingBody{}
	}
	if _, ok := p.m[id]; !ok {
		p.n.Add(1)
	}
	p.m[id] = pendingBody{seq: seq, caller: caller, body: body}
}

// Supersede replaces the pending change of task id, if one is, by a later write of the task (numbered
// seq) handed over after it: reads show that write from now on, until it settles. Every write of a task
// that does not Put calls it. Without it, a read could show the pending change after another read had
// seen the later write, committed in the same group as the pending one but not yet settled: a reader
// would see the task go back.
func (p *Pending) Supersede(id a2a.TaskID, seq int64, caller string, body []byte) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[id]; ok {
		p.m[id] = pendingBody{seq: seq, caller: caller, body: body}
	}
}

// Get returns the pending change of task id, if one is.
func (p *Pending) Get(id a2a.TaskID) (body []byte, caller string, ok bool) {
	if p.n.Load() == 0 {
		return nil, "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.m[id]
	return b.body, b.caller, ok
}

// Settled tells that the write numbered seq of task id is committed (or has failed): a pending change
// handed over no later than it is no longer pending. Every write of a task calls it, so that a change
// handed over after the pending one, and committed with it, also settles it.
func (p *Pending) Settled(id a2a.TaskID, seq int64) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.m[id]; ok && b.seq <= seq {
		delete(p.m, id)
		p.n.Add(-1)
	}
}
