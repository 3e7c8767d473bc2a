package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// The writes of one caller are committed in the order they were handed over, UpdateSoon's and
// UpdateLater's included: the last one wins, Get after a write that returned (Update, UpdateLater's wait,
// Settle) sees it, and a reader never sees a later state replaced by an earlier one.
func testOrder(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	for i, tt := range []struct {
		name  string
		write func(n int) // hands over the task's writes; the last is step 9, completed
	}{
		{"UpdateSoon then Update", func(n int) {
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.Update(ctx, stepTask(n, a2a.TaskStateCompleted, 9)); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateSoon then UpdateLater's wait", func(n int) {
			s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.UpdateLater(ctx, stepTask(n, a2a.TaskStateCompleted, 9))(); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateLater then Update before its wait", func(n int) {
			wait := s.UpdateLater(ctx, stepTask(n, a2a.TaskStateWorking, 1))
			if err := s.Update(ctx, stepTask(n, a2a.TaskStateCompleted, 9)); err != nil {
				t.Error(err)
			}
			if err := wait(); err != nil {
				t.Error(err)
			}
		}},
		{"Update then UpdateSoon then Settle", func(n int) {
			if err := s.Update(ctx, stepTask(n, a2a.TaskStateWorking, 1)); err != nil {
				t.Error(err)
			}
			s.UpdateSoon(stepTask(n, a2a.TaskStateCompleted, 9))
			if err := s.Settle(ctx); err != nil {
				t.Error(err)
			}
		}},
		{"UpdateSoons then Settle", func(n int) {
			for i := 1; i < 9; i++ {
				s.UpdateSoon(stepTask(n, a2a.TaskStateWorking, i))
			}
			s.UpdateSoon(stepTask(n, a2a.TaskStateCompleted, 9))
			if err := s.Settle(ctx); err != nil {
				t.Error(err)
			}
		}},
		{"every kind, then Settle", func(n int) {
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
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := i + 1 // a task of its own for each case
			create(t, s, stepTask(n, a2a.TaskStateSubmitted, 0))
			tt.write(n)
			checkStored(t, s, stepTask(n, a2a.TaskStateCompleted, 9), tt.name)
		})
	}

	// UpdateSoon's change is read at once, before its commit: each Get right after an UpdateSoon sees it,
	// in whichever way it reads (a commit is far slower than a read, so most of these Gets come first).
	t.Run("UpdateSoon is read at once", func(t *testing.T) {
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
	})

	t.Run("UpdateSoon of a task not stored", func(t *testing.T) {
		s.UpdateSoon(stepTask(90, a2a.TaskStateWorking, 1))
		if err := s.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, taskID(90))
		checkNotFound(t, "Get after UpdateSoon of a task not stored", err, taskID(90))
	})

	// Many goroutines, each writing its own tasks every way, all end at their last write.
	t.Run("concurrent writers", func(t *testing.T) {
		s := open(t)
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
	})

	// A reader polling a task while its writer hands over steps every way never sees a step go back.
	t.Run("a reader never goes back", func(t *testing.T) {
		s := open(t)
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
	})
}

// CreateBatched: a task it takes (true) is stored, Get sees it after Settle or within a short poll and
// List once it is written; a task it does not take (false) is not stored; what the caller does to its
// task afterwards does not reach the store.
func testCreateBatched(t *testing.T, open opener) {
	const poll = 10 * time.Second
	visible := func(t *testing.T, s store.Tasks, want *a2a.Task) {
		t.Helper()
		if err := s.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !eventually(poll, func() bool { _, err := s.Get(t.Context(), want.ID); return err == nil }) {
			t.Fatalf("a task CreateBatched took is not found by Get within %v", poll)
		}
		checkStored(t, s, want, "after CreateBatched")
	}
	// listed waits until the store lists n tasks, for as long as the background writer goes on writing
	// (a loaded machine writes a flood slowly) but no more than poll without progress.
	listed := func(t *testing.T, s store.Tasks, n int) {
		t.Helper()
		total, last, since := 0, -1, time.Now()
		for {
			page, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 1}, store.OperatorScope())
			if err != nil {
				t.Fatalf("ListInScope: %v", err)
			}
			if total = page.Total; total >= n {
				break
			}
			if total != last {
				last, since = total, time.Now()
			} else if time.Since(since) > poll {
				t.Fatalf("the store lists %d tasks, and no more for %v; want %d", total, poll, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if total != n {
			t.Errorf("the store lists %d tasks, want %d", total, n)
		}
	}

	t.Run("taken is stored", func(t *testing.T) {
		s := open(t)
		handed := fullTask()
		handed.Status.State = a2a.TaskStateRejected
		want := clone(t, handed)
		if !s.CreateBatched(handed) {
			t.Fatal("CreateBatched refused a task in an empty store")
		}
		// The caller trims what it handed over, as the door does.
		handed.History = handed.History[:0]
		handed.Status = a2a.TaskStatus{State: a2a.TaskStateFailed}
		handed.Metadata = nil
		visible(t, s, want)
		listed(t, s, 1)
		checkStored(t, s, want, "once listed")
		if _, err := s.GetInScope(t.Context(), want.ID, store.PeerScope("nobody")); err == nil {
			t.Error("a batched task is in the scope of a member that did not send it")
		}
	})

	t.Run("a peer's is in its scope", func(t *testing.T) {
		s := open(t)
		want := peerTask(1, "lead")
		if !s.CreateBatched(clone(t, want)) {
			t.Fatal("CreateBatched refused a task in an empty store")
		}
		visible(t, s, want)
		listed(t, s, 1)
		page, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 10}, store.PeerScope("lead"))
		if err != nil || !cmp.Equal([]a2a.TaskID{want.ID}, taskIDs(page.Tasks)) {
			t.Errorf("lead's list: %v, %v; want its batched task", taskIDs(page.Tasks), err)
		}
	})

	t.Run("no id", func(t *testing.T) {
		s := open(t)
		if s.CreateBatched(&a2a.Task{ContextID: "ctx_a", Status: a2a.TaskStatus{State: a2a.TaskStateRejected}}) {
			t.Error("CreateBatched took a task without an id")
		}
		create(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted)) // a write after it, to flush whatever it kept
		if err := s.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		listed(t, s, 1)
	})

	// Create's id must be new to the store, and what CreateBatched does with an id it was handed before
	// is not said: only that it never replaces the task stored first, once the background write is done.
	holdsFirst := func(t *testing.T, s store.Tasks, first *a2a.Task) {
		t.Helper()
		if !eventually(poll, func() bool {
			got, err := s.Get(t.Context(), first.ID)
			return err == nil && cmp.Equal(first, got)
		}) {
			checkStored(t, s, first, fmt.Sprintf("%v after a second task of its id", poll))
			return
		}
		for range 20 {
			checkStored(t, s, first, "after a second task of its id")
			time.Sleep(10 * time.Millisecond)
		}
	}

	t.Run("an id handed twice keeps the first", func(t *testing.T) {
		s := open(t)
		first := task(1, "ctx_a", a2a.TaskStateRejected)
		if !s.CreateBatched(clone(t, first)) {
			t.Fatal("CreateBatched refused a task in an empty store")
		}
		s.CreateBatched(task(1, "ctx_b", a2a.TaskStateCompleted)) // taken or not, it does not replace the first
		listed(t, s, 1)
		holdsFirst(t, s, first)
		listed(t, s, 1)
	})

	t.Run("an id already stored keeps the stored task", func(t *testing.T) {
		s := open(t)
		stored := task(1, "ctx_a", a2a.TaskStateCompleted)
		create(t, s, stored)
		s.CreateBatched(task(1, "ctx_b", a2a.TaskStateRejected)) // taken or not, it does not replace it
		if err := s.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		create(t, s, task(2, "ctx_a", a2a.TaskStateRejected))
		holdsFirst(t, s, stored)
		listed(t, s, 2)
	})

	// A flood: every task taken is stored, every task refused is not.
	t.Run("flood", func(t *testing.T) {
		s := open(t)
		const n = 3000
		taken := make([]bool, n)
		count := 0
		for i := range n {
			if taken[i] = s.CreateBatched(task(1000+i, "ctx_flood", a2a.TaskStateRejected)); taken[i] {
				count++
			}
		}
		if count == 0 {
			t.Fatal("CreateBatched took none of a flood into an empty store")
		}
		listed(t, s, count)
		for i := range n {
			want := task(1000+i, "ctx_flood", a2a.TaskStateRejected)
			got, err := s.Get(t.Context(), want.ID)
			switch {
			case taken[i] && err != nil:
				t.Errorf("%s was taken and is not stored: %v", want.ID, err)
			case taken[i] && !cmp.Equal(want, got):
				t.Errorf("%s was taken and is stored as %s", want.ID, cmp.Diff(want, got))
			case !taken[i]:
				checkNotFound(t, fmt.Sprintf("Get of %s, refused", want.ID), err, want.ID)
			}
		}
		t.Logf("CreateBatched took %d of %d", count, n)
	})
}
