package store

import (
	"container/list"
	"sync"

	"github.com/murmur-run/murmur/a2a"
)

// taskCache keeps the stored JSON of the tasks most recently written or read, so GetTask, the door's
// hottest call, is answered without SQLite or a decode. The store updates it after each committed
// write while holding its write lock, so the cache never holds a version older than the file's.
// The byte slices it hands out are never modified.
type taskCache struct {
	mu       sync.Mutex
	max      int // entries
	maxBytes int // bytes of JSON, all entries together
	bytes    int
	order    *list.List // front: most recently used; values are *cacheEntry
	byID     map[a2a.TaskID]*list.Element
}

type cacheEntry struct {
	id     a2a.TaskID
	caller string
	body   []byte
}

func newTaskCache(max, maxBytes int) *taskCache {
	return &taskCache{max: max, maxBytes: maxBytes, order: list.New(), byID: map[a2a.TaskID]*list.Element{}}
}

func (c *taskCache) get(id a2a.TaskID) (body []byte, caller string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, "", false
	}
	c.order.MoveToFront(e)
	ce := e.Value.(*cacheEntry)
	return ce.body, ce.caller, true
}

func (c *taskCache) put(id a2a.TaskID, caller string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		ce := e.Value.(*cacheEntry)
		c.bytes += len(body) - len(ce.body)
		ce.body, ce.caller = body, caller
		c.order.MoveToFront(e)
	} else {
		c.byID[id] = c.order.PushFront(&cacheEntry{id: id, caller: caller, body: body})
		c.bytes += len(body)
	}
	// The newest entry stays even when it alone is over the byte bound: it was just written or read.
	for c.order.Len() > c.max || (c.bytes > c.maxBytes && c.order.Len() > 1) {
		last := c.order.Back()
		c.order.Remove(last)
		ce := last.Value.(*cacheEntry)
		c.bytes -= len(ce.body)
		delete(c.byID, ce.id)
	}
}

func (c *taskCache) remove(id a2a.TaskID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.order.Remove(e)
		delete(c.byID, id)
	}
}
