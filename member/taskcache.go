package member

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
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used; values are *cacheEntry
	byID  map[a2a.TaskID]*list.Element
}

type cacheEntry struct {
	id   a2a.TaskID
	body []byte
}

func newTaskCache(max int) *taskCache {
	return &taskCache{max: max, order: list.New(), byID: map[a2a.TaskID]*list.Element{}}
}

func (c *taskCache) get(id a2a.TaskID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).body, true
}

func (c *taskCache) put(id a2a.TaskID, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		e.Value.(*cacheEntry).body = body
		c.order.MoveToFront(e)
		return
	}
	c.byID[id] = c.order.PushFront(&cacheEntry{id: id, body: body})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byID, last.Value.(*cacheEntry).id)
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
