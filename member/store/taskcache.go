package store

import (
	"container/list"
	"sync"

	"github.com/murmur-run/murmur/a2a"
)

// taskCache keeps the stored JSON of the tasks most recently written or read, so GetTask, the door's
// hottest call, is answered without SQLite or a decode. The store updates it after each committed
// write while holding its write lock (put, remove), so the cache never holds a version older than the
// file's. A read that missed fills it with what it read from the file (fill) only when no write came
// to the cache between the read's start (mark) and its fill: a read that raced a write may hold the
// version the write replaced, and never enters. The byte slices it hands out are never modified.
type taskCache struct {
	mu       sync.Mutex
	max      int // entries
	maxBytes int // bytes of JSON, all entries together
	bytes    int
	order    *list.List // front: most recently used; values are *cacheEntry
	byID     map[a2a.TaskID]*list.Element
	writes   uint64 // puts and removes so far: what mark and fill compare
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

// mark is where the cache's writes stand, for a read about to go to the file (fill).
func (c *taskCache) mark() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// fill keeps what a read found in the file for a task the cache did not hold, unless a write came to
// the cache since the read's mark (the read may have missed it) or the task is cached by now.
func (c *taskCache) fill(id a2a.TaskID, caller string, body []byte, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != mark {
		return
	}
	if _, ok := c.byID[id]; ok {
		return
	}
	c.byID[id] = c.order.PushFront(&cacheEntry{id: id, caller: caller, body: body})
	c.bytes += len(body)
	c.evict()
}

func (c *taskCache) put(id a2a.TaskID, caller string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if e, ok := c.byID[id]; ok {
		ce := e.Value.(*cacheEntry)
		c.bytes += len(body) - len(ce.body)
		ce.body, ce.caller = body, caller
		c.order.MoveToFront(e)
	} else {
		c.byID[id] = c.order.PushFront(&cacheEntry{id: id, caller: caller, body: body})
		c.bytes += len(body)
	}
	c.evict()
}

// evict drops the least recently used entries past the bounds. The newest entry stays even when it
// alone is over the byte bound: it was just written or read.
func (c *taskCache) evict() {
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
	c.writes++
	if e, ok := c.byID[id]; ok {
		c.order.Remove(e)
		c.bytes -= len(e.Value.(*cacheEntry).body)
		delete(c.byID, id)
	}
}

// clear drops every entry, for a write whose outcome is unknown and whose tasks are not known either.
func (c *taskCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	c.order.Init()
	clear(c.byID)
	c.bytes = 0
}

// TaskCache is the store's cache of recent task JSON (taskCache) for another store of a process that
// holds its database alone: the PostgreSQL store of a member of one process, whose every change of a
// task goes through that process. The store Puts each write's task (or Removes it) once the write is
// committed and before the write's caller is answered; a read that missed takes a Mark before it goes
// to the database and Fills what it read, which the cache keeps only when no Put, Remove or Clear came
// between the two. A nil *TaskCache caches nothing: Get misses, the rest do nothing. The byte slices it
// holds and hands out are never modified. It is safe for concurrent use.
type TaskCache struct{ c *taskCache }

// NewTaskCache returns an empty cache bounded as the store's own (cachedTasks, cachedBytes).
func NewTaskCache() *TaskCache { return &TaskCache{c: newTaskCache(cachedTasks, cachedBytes)} }

// Get returns task id's cached JSON and the member that sent it.
func (t *TaskCache) Get(id a2a.TaskID) (body []byte, caller string, ok bool) {
	if t == nil {
		return nil, "", false
	}
	return t.c.get(id)
}

// Mark is where the cache's writes stand, for a read about to go to the database (Fill).
func (t *TaskCache) Mark() uint64 {
	if t == nil {
		return 0
	}
	return t.c.mark()
}

// Fill keeps what a read that began at mark found in the database, unless a write came to the cache
// since (the read may have missed it) or the task is cached by now.
func (t *TaskCache) Fill(id a2a.TaskID, caller string, body []byte, mark uint64) {
	if t != nil {
		t.c.fill(id, caller, body, mark)
	}
}

// Put keeps body, the task's JSON as committed, in place of what the cache held for it.
func (t *TaskCache) Put(id a2a.TaskID, caller string, body []byte) {
	if t != nil {
		t.c.put(id, caller, body)
	}
}

// Remove drops task id: it was removed, or changed in a way the cache was not given.
func (t *TaskCache) Remove(id a2a.TaskID) {
	if t != nil {
		t.c.remove(id)
	}
}

// Clear drops every task.
func (t *TaskCache) Clear() {
	if t != nil {
		t.c.clear()
	}
}
