package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
)

// maxMessages bounds the message filter: past it the filter is given up and every lookup is a query, as
// before it, so a long-lived member that created millions of tasks keeps no set of them all.
var maxMessages = 100_000

// messageSeed seeds the filter's hashes, one per process.
var messageSeed = maphash.MakeSeed()

// MessageFilter is a store's filter of the messages its tasks were created by: a hash of each (caller,
// message id) pair the database holds or this process handed to it, so that GetByMessage of a message no
// task came from (the first copy of every SendMessage) is answered without a query. It may hold pairs
// the database no longer does (swept tasks) and hashes that collide: those lookups query, as all did
// before. It never lacks a pair the database holds, as long as this process is the database's only
// writer (a SQLite file; PostgreSQL under a member of one process, never replicas): a create Adds its
// pair before its row is handed to be committed, and the database's pairs are read in at the first
// lookup (none for a database this process made), so a pair committed before that read is in it and one
// committed after was added by its create. A nil *MessageFilter filters nothing. Safe for concurrent use.
type MessageFilter struct {
	mu     sync.Mutex
	loaded bool // the file's pairs are in seen
	off    bool // past maxMessages: every lookup queries
	seen   map[uint64]struct{}
}

// NewMessageFilter returns the filter of a store; empty says its database is new, holding no task.
func NewMessageFilter(empty bool) *MessageFilter {
	return &MessageFilter{loaded: empty, seen: map[uint64]struct{}{}}
}

func messageHash(caller, messageID string) uint64 {
	var h maphash.Hash
	h.SetSeed(messageSeed)
	h.WriteString(caller)
	h.WriteByte(0)
	h.WriteString(messageID)
	return h.Sum64()
}

// Add records the pair of a task about to be stored.
func (m *MessageFilter) Add(caller, messageID string) {
	if m == nil || messageID == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addLocked(messageHash(caller, messageID))
}

func (m *MessageFilter) addLocked(h uint64) {
	if m.off {
		return
	}
	m.seen[h] = struct{}{}
	if len(m.seen) > maxMessages {
		m.off, m.seen = true, nil
	}
}

// MayHold reports whether the database may hold a task created by the message: false only when it
// holds none. The first call reads the pairs of an existing database in with load, which calls add for
// each (caller, message id) of its tasks.
func (m *MessageFilter) MayHold(ctx context.Context, caller, messageID string, load func(ctx context.Context, add func(caller, messageID string)) error) (bool, error) {
	if m == nil {
		return true, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return true, nil
	}
	if !m.loaded {
		if err := load(ctx, func(c, id string) { m.addLocked(messageHash(c, id)) }); err != nil {
			return false, fmt.Errorf("member: reading the ids of the messages tasks came from: %w", err)
		}
		m.loaded = true
		if m.off {
			return true, nil
		}
	}
	_, ok := m.seen[messageHash(caller, messageID)]
	return ok, nil
}

// loadMessages reads every (caller, message id) pair of the file's tasks into add.
func (s *Store) loadMessages(ctx context.Context, add func(caller, messageID string)) error {
	rows, err := s.read.QueryContext(ctx, `SELECT caller, message_id FROM tasks WHERE message_id != ''`)
	if err != nil {
		return err
	}
	defer rows.Close()
	return ReadMessages(rows, add)
}
