package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// batchedPoll bounds how long a task CreateBatched took may stay unseen, and how long the listed
// tasks may stay at one count while its background writer writes a flood.
const batchedPoll = 10 * time.Second

// CreateBatched: a task it takes (true) is stored, Get sees it after Settle or within a short poll and
// List once it is written; a task it does not take (false) is not stored; what the caller does to its
// task afterwards does not reach the store. Each case opens a store of its own.
func testCreateBatched(t *testing.T, open opener) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, s store.Tasks)
	}{
		{"taken is stored", testBatchedTaken},
		{"a peer's is in its scope", testBatchedPeer},
		{"no id", testBatchedNoID},
		{"an id handed twice keeps the first", testBatchedTwice},
		{"an id already stored keeps the stored task", testBatchedStoredID},
		{"flood", testBatchedFlood},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

func testBatchedTaken(t *testing.T, s store.Tasks) {
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
}

func testBatchedPeer(t *testing.T, s store.Tasks) {
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
}

func testBatchedNoID(t *testing.T, s store.Tasks) {
	if s.CreateBatched(&a2a.Task{ContextID: "ctx_a", Status: a2a.TaskStatus{State: a2a.TaskStateRejected}}) {
		t.Error("CreateBatched took a task without an id")
	}
	create(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted)) // a write after it, to flush whatever it kept
	if err := s.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	listed(t, s, 1)
}

// Create's id must be new to the store, and what CreateBatched does with an id it was handed before
// is not said: only that it never replaces the task stored first, once the background write is done
// (here and in testBatchedStoredID).
func testBatchedTwice(t *testing.T, s store.Tasks) {
	first := task(1, "ctx_a", a2a.TaskStateRejected)
	if !s.CreateBatched(clone(t, first)) {
		t.Fatal("CreateBatched refused a task in an empty store")
	}
	s.CreateBatched(task(1, "ctx_b", a2a.TaskStateCompleted)) // taken or not, it does not replace the first
	listed(t, s, 1)
	holdsFirst(t, s, first)
	listed(t, s, 1)
}

func testBatchedStoredID(t *testing.T, s store.Tasks) {
	stored := task(1, "ctx_a", a2a.TaskStateCompleted)
	create(t, s, stored)
	s.CreateBatched(task(1, "ctx_b", a2a.TaskStateRejected)) // taken or not, it does not replace it
	if err := s.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	create(t, s, task(2, "ctx_a", a2a.TaskStateRejected))
	holdsFirst(t, s, stored)
	listed(t, s, 2)
}

// A flood: every task taken is stored, every task refused is not.
func testBatchedFlood(t *testing.T, s store.Tasks) {
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
}

// visible checks that a task CreateBatched took is stored as want once Settle returns, or within
// batchedPoll.
func visible(t *testing.T, s store.Tasks, want *a2a.Task) {
	t.Helper()
	if err := s.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !eventually(batchedPoll, func() bool { _, err := s.Get(t.Context(), want.ID); return err == nil }) {
		t.Fatalf("a task CreateBatched took is not found by Get within %v", batchedPoll)
	}
	checkStored(t, s, want, "after CreateBatched")
}

// listed waits until the store lists n tasks, for as long as the background writer goes on writing
// (a loaded machine writes a flood slowly) but no more than batchedPoll without progress.
func listed(t *testing.T, s store.Tasks, n int) {
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
		} else if time.Since(since) > batchedPoll {
			t.Fatalf("the store lists %d tasks, and no more for %v; want %d", total, batchedPoll, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if total != n {
		t.Errorf("the store lists %d tasks, want %d", total, n)
	}
}

// holdsFirst checks that the store keeps first, stored before a second task of its id was handed to
// CreateBatched, within batchedPoll and for a while after.
func holdsFirst(t *testing.T, s store.Tasks, first *a2a.Task) {
	t.Helper()
	if !eventually(batchedPoll, func() bool {
		got, err := s.Get(t.Context(), first.ID)
		return err == nil && cmp.Equal(first, got)
	}) {
		checkStored(t, s, first, fmt.Sprintf("%v after a second task of its id", batchedPoll))
		return
	}
	for range 20 {
		checkStored(t, s, first, "after a second task of its id")
		time.Sleep(10 * time.Millisecond)
	}
}
