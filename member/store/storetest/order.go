package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// The writes of one caller are committed in the order they were handed over, UpdateSoon's and
// UpdateLater's included: the last one wins, Get after a write that returned (Update, UpdateLater's wait,
// Settle) sees it, and a reader never sees a later state replaced by an earlier one.
func testOrder(t *testing.T, open opener) {
	s := open(t)
	for i, tt := range orderCases(s) {
		t.Run(tt.name, func(t *testing.T) {
			n := i + 1 // a task of its own for each case
			create(t, s, stepTask(n, a2a.TaskStateSubmitted, 0))
			tt.write(t, n)
			checkStored(t, s, stepTask(n, a2a.TaskStateCompleted, 9), tt.name)
		})
	}
	t.Run("UpdateSoon is read at once", func(t *testing.T) { testUpdateSoonReadAtOnce(t, s) })
	t.Run("UpdateSoon of a task not stored", func(t *testing.T) { testUpdateSoonNotStored(t, s) })
	t.Run("concurrent writers", func(t *testing.T) { testConcurrentWriters(t, open(t)) })
	t.Run("a reader never goes back", func(t *testing.T) { testReaderNeverGoesBack(t, open(t)) })
}

// orderCase is one way of handing over a task's writes to s: write hands over those of task n, the last
// being step 9, completed.
type orderCase struct {
	name  string
	write func(t *testing.T, n int)
}

// orderCases are the ways of handing over a task's writes to s that testOrder checks.
func orderCases(s store.Tasks) []orderCase {
	return []orderCase{
		{"UpdateSoon then Update", func(t *testing.T, n int) {
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.Update(t.Context(), stepTask(n, a2a.TaskStateCompleted, 9)); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateSoon then UpdateLater's wait", func(t *testing.T, n int) {
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.UpdateLater(t.Context(), stepTask(n, a2a.TaskStateCompleted, 9))(); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateLater then Update before its wait", func(t *testing.T, n int) {
			wait := s.UpdateLater(t.Context(), stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.Update(t.Context(), stepTask(n, a2a.TaskStateCompleted, 9)); err != nil {
				t.Error(err)
			}
			if err := wait(); err != nil {
				t.Error(err)
			}
		}},
		{"Update then UpdateSoon then Settle", func(t *testing.T, n int) {
			if err := s.Update(t.Context(), stepTask(n, a2a.TaskStateWorking, 1)); err != nil {
				t.Error(err)
			}
			s.UpdateSoon(stepTask(n, a2a.TaskStateCompleted, 9))
			if err := s.Settle(t.Context()); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateSoons then Settle", func(t *testing.T, n int) {
			for i := 1; i < 9; i++ {
				s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, i))
			}
			s.UpdateSoon(stepTask(n, a2a.TaskStateCompleted, 9))
			if err := s.Settle(t.Context()); err != nil {
				t.Error(err)
			}
		}},
		{"every kind, then Settle", func(t *testing.T, n int) {
			ctx := t.Context()
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
			wait := s.UpdateLater(ctx, stepTask(n, a2a.TaskStateWorking, 2))
			if err := s.Update(ctx, stepTask(n, a2a.TaskStateInputRequired, 3)); err != nil {
				t.Error(err)
			}
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 4))
			wait2 := s.UpdateLater(ctx, stepTask(n, a2a.TaskStateCompleted, 9))
			if err := errors.Join(wait(), wait2()); err != nil {
				t.Error(err)
			}
		}},
	}
}

// UpdateSoon's change is read at once, before its commit: each Get right after an UpdateSoon sees it,
// in whichever way it reads (a commit is far slower than a read, so most of these Gets come first).
func testUpdateSoonReadAtOnce(t *testing.T, s store.Tasks) {
	ctx := t.Context()
	const n, steps = 80, 60
	create(t, s, stepTask(n, a2a.TaskStateSubmitted, 0))
	for i := 1; i <= steps; i++ {
		want := stepTask(n, a2a.TaskStateWorking, i)
		s.UpdateSoon(clone(t, want))
		got, err := s.Get(ctx, want.ID)
		if err != nil || !cmp.Equal(want, got) {
			t.Fatalf("Get right after UpdateSoon of step %d: %v\n%s", i, err, cmp.Diff(want, got))
		}
		body, err := s.GetInScope(ctx, want.ID, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := store.Decode(want.ID, body); err != nil || !cmp.Equal(want, got) {
			t.Fatalf("GetInScope right after UpdateSoon of step %d: %v\n%s", i, err, cmp.Diff(want, got))
		}
		if all, err := s.GetAll(ctx, []a2a.TaskID{want.ID}); err != nil || len(all) != 1 || !cmp.Equal(want, all[0]) {
			t.Fatalf("GetAll right after UpdateSoon of step %d: %v", i, err)
		}
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, stepTask(n, a2a.TaskStateWorking, steps), "after UpdateSoons and Settle")
}

func testUpdateSoonNotStored(t *testing.T, s store.Tasks) {
	s.UpdateSoon(stepTask(90, a2a.TaskStateWorking, 1))
	if err := s.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(t.Context(), taskID(90))
	checkNotFound(t, "Get after UpdateSoon of a task not stored", err, taskID(90))
}

// Many goroutines, each writing its own tasks every way, all end at their last write.
func testConcurrentWriters(t *testing.T, s store.Tasks) {
	ctx := t.Context()
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n := 100 + w*each + i
				if err := s.Create(ctx, stepTask(n, a2a.TaskStateSubmitted, 0)); err != nil {
					t.Error(err)
					return
				}
				s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
				wait := s.UpdateLater(ctx, stepTask(n, a2a.TaskStateWorking, 2))
				if err := s.Update(ctx, stepTask(n, a2a.TaskStateInputRequired, 3)); err != nil {
					t.Error(err)
				}
				if i%2 == 0 {
					s.UpdateSoon(stepTask(n, a2a.TaskStateCompleted, 9))
				} else if err := s.Update(ctx, stepTask(n, a2a.TaskStateCompleted, 9)); err != nil {
					t.Error(err)
				}
				if err := wait(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	for n := 100; n < 100+writers*each; n++ {
		checkStored(t, s, stepTask(n, a2a.TaskStateCompleted, 9), "after concurrent writers and Settle")
	}
	page, err := s.ListInScope(ctx, store.ListQuery{State: a2a.TaskStateCompleted, PageSize: 1}, store.OperatorScope())
	if err != nil || page.Total != writers*each {
		t.Errorf("List completed: total %d (%v), want %d", page.Total, err, writers*each)
	}
}

// A reader polling a task while its writer hands over steps every way never sees a step go back.
func testReaderNeverGoesBack(t *testing.T, s store.Tasks) {
	ctx := t.Context()
	const steps = 150
	create(t, s, stepTask(1, a2a.TaskStateWorking, 0))
	done := make(chan struct{})
	var waits []func() error
	go func() {
		defer close(done)
		for i := 1; i <= steps; i++ {
			switch i % 3 {
			case 0:
				s.UpdateSoon(stepTask(1, a2a.TaskStateWorking, i))
			case 1:
				waits = append(waits, s.UpdateLater(ctx, stepTask(1, a2a.TaskStateWorking, i)))
			case 2:
				if err := s.Update(ctx, stepTask(1, a2a.TaskStateWorking, i)); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	last, reads := 0.0, 0
read:
	for {
		select {
		case <-done:
			break read
		default:
		}
		got, err := s.Get(ctx, taskID(1))
		if err != nil {
			t.Error(err)
			break
		}
		reads++
		step, _ := got.Metadata["step"].(float64)
		if step < last {
			t.Errorf("read %d: step %v after step %v", reads, step, last)
			break
		}
		last = step
	}
	<-done
	for _, wait := range waits {
		if err := wait(); err != nil {
			t.Error(err)
		}
	}
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, stepTask(1, a2a.TaskStateWorking, steps), fmt.Sprintf("after %d steps and Settle (%d reads)", steps, reads))
}
