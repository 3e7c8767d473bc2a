package store

import "sync"

// The seams below let the tests of the packages above the store (the session's flood tests) observe
// and hold its writer. Nothing in the runtime calls them.

// SetWriteHook sets a function that is called, with the write lock held, before each write transaction
// commits, with what it is ("create", "update", "recover", "batch", "sweep") and the rows it writes or
// removes; nil removes it.
func (s *Store) SetWriteHook(hook func(op string, rows int)) {
	s.wmu.Lock()
	s.writing = hook
	s.wmu.Unlock()
}

// LockWrites takes the write lock, as a long write would, and returns what lets it go (once; later
// calls do nothing).
func (s *Store) LockWrites() (unlock func()) {
	s.wmu.Lock()
	var once sync.Once
	return func() { once.Do(s.wmu.Unlock) }
}

// WriteSynchronous reports the write connection's PRAGMA synchronous (2 is FULL).
func (s *Store) WriteSynchronous() (int, error) {
	var n int
	err := s.write.QueryRow(`PRAGMA synchronous`).Scan(&n)
	return n, err
}

// WaitingWrites reports the Creates and Updates handed to the group commit (or on their way to it) that
// have not returned yet.
func (s *Store) WaitingWrites() int { return int(s.fg.active.Load()) }

// Batched reports the tasks handed to CreateBatched that the batch writer has not yet committed (List
// does not show them until it has).
func (s *Store) Batched() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.pending)
}
