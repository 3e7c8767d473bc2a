package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Writes that wait at the same moment share one transaction (one fsync), and a row that fails in it (a
// duplicate id, an update of a task not stored) fails alone: the others are stored, durably, and read
// back after the store is closed and opened again.
func TestConcurrentWritesShareOneCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, storeTask(0, "ctx", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	groups := map[string][]int{}
	s.SetWriteHook(func(op string, rows int) {
		mu.Lock()
		groups[op] = append(groups[op], rows)
		mu.Unlock()
	})

	const n = 40
	unlock := s.LockWrites() // a long write holds the store while the writers come
	defer unlock()
	errs := make([]error, n+2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Create(ctx, storeTask(i+1, "ctx", a2a.TaskStateSubmitted)) })
	}
	wg.Go(func() { errs[n] = s.Create(ctx, storeTask(0, "ctx", a2a.TaskStateSubmitted)) }) // a duplicate
	wg.Go(func() {
		errs[n+1] = s.Update(ctx, storeTask(99, "ctx", a2a.TaskStateCompleted)) // never created
	})
	for s.WaitingWrites() < n+2 {
		time.Sleep(time.Millisecond)
	}
	unlock()
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Errorf("create %d: %v", i+1, errs[i])
		}
	}
	if errs[n] == nil {
		t.Error("a second create of tsk_00 succeeded")
	}
	if !errors.Is(errs[n+1], ErrNotFound) {
		t.Errorf("an update of a task never stored answered %v, want ErrNotFound", errs[n+1])
	}
	mu.Lock()
	if len(groups["create"]) != 1 || groups["create"][0] != n || len(groups["update"]) != 0 {
		t.Errorf("%d concurrent creates were written in groups %v, want one group of %d", n, groups, n)
	}
	mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n + 1 {
		if _, err := s.Get(ctx, storeTask(i, "ctx", a2a.TaskStateSubmitted).ID); err != nil {
			t.Errorf("after reopening: task %d: %v", i, err)
		}
	}
	page, err := s.List(ctx, ListQuery{PageSize: 100})
	if err != nil || page.Total != n+1 {
		t.Errorf("after reopening the store lists %d tasks (%v), want %d", page.Total, err, n+1)
	}
}

// A write handed to a closed store fails; it never waits forever.
func TestWriteAfterCloseFails(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Create(context.Background(), storeTask(1, "ctx", a2a.TaskStateSubmitted)); err == nil {
		t.Error("Create after Close succeeded")
	}
}
