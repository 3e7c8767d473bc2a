package store

import "sync"

// The seams below let the tests of the packages above the store (the session's flood tests in member,
// the door's fuzz test in server) observe and hold the SQLite store's writer. Nothing in the runtime
// calls them, and they are no part of Tasks. They are here, not in a _test.go file, only because a
// _test.go file is compiled for this package's own tests alone; what only this package's tests use
// lives in seams_test.go.

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

// PauseCommitter holds the committer between two groups, without the write lock, until resume is called
// (once; later calls do nothing): rows handed over meanwhile stay untaken by it.
func (s *Store) PauseCommitter() (resume func()) {
	held := make(chan error)
	s.writes <- &pendingWrite{op: opPause, done: held}
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}

// WriteSynchronous reports the write connection's PRAGMA synchronous (2 is FULL).
func (s *Store) WriteSynchronous() (int, error) {
	var n int
	err := s.write.QueryRow(`PRAGMA synchronous`).Scan(&n)
	return n, err
}

// Batched reports the tasks handed to CreateBatched that the batch writer has not yet committed
// (ListInScope does not show them until it has).
func (s *Store) Batched() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.pending)
}
