package storetest

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// listFixture stores tasks 1..5, created in that order, then one whose status timestamp is older than
// all of theirs, then one with no status timestamp: the order of creation, not of timestamps, is the
// order of lists.
func listFixture(t *testing.T, open opener) store.Tasks {
	t.Helper()
	s := open(t)
	old := task(0, "ctx_b", a2a.TaskStateCanceled)
	old.ID = "tsk_old"
	old.Status.Timestamp = a2a.NewTimestamp(epoch.Add(-time.Hour))
	create(t, s,
		task(1, "ctx_a", a2a.TaskStateCompleted),
		task(2, "ctx_b", a2a.TaskStateWorking),
		task(3, "ctx_a", a2a.TaskStateWorking),
		task(4, "ctx_a", a2a.TaskStateFailed),
		task(5, "ctx_b", a2a.TaskStateCompleted),
		old,
		&a2a.Task{ID: "tsk_untimed", ContextID: "ctx_c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}},
	)
	return s
}

// ListInScope filters by context, state and status timestamp (strictly after), newest created first,
// with the total of every page, and answers whole tasks.
func testList(t *testing.T, open opener) {
	s := listFixture(t, open)
	for _, tt := range []struct {
		name  string
		q     store.ListQuery
		want  []a2a.TaskID
		total int
	}{
		{"all, newest created first", store.ListQuery{}, []a2a.TaskID{"tsk_untimed", "tsk_old", "tsk_05", "tsk_04", "tsk_03", "tsk_02", "tsk_01"}, 7},
		{"context", store.ListQuery{ContextID: "ctx_a"}, []a2a.TaskID{"tsk_04", "tsk_03", "tsk_01"}, 3},
		{"state", store.ListQuery{State: a2a.TaskStateCompleted}, []a2a.TaskID{"tsk_05", "tsk_01"}, 2},
		{"context and state", store.ListQuery{ContextID: "ctx_a", State: a2a.TaskStateWorking}, []a2a.TaskID{"tsk_03"}, 1},
		{"after", store.ListQuery{After: epoch.Add(3 * time.Second)}, []a2a.TaskID{"tsk_05", "tsk_04"}, 2},
		{"after, between milliseconds", store.ListQuery{After: epoch.Add(3*time.Second + 500*time.Microsecond)}, []a2a.TaskID{"tsk_05", "tsk_04"}, 2},
		{"after, a millisecond before", store.ListQuery{After: epoch.Add(3*time.Second - time.Millisecond)}, []a2a.TaskID{"tsk_05", "tsk_04", "tsk_03"}, 3},
		{"after, long ago", store.ListQuery{After: epoch.Add(-24 * time.Hour)}, []a2a.TaskID{"tsk_old", "tsk_05", "tsk_04", "tsk_03", "tsk_02", "tsk_01"}, 6},
		{"after and context", store.ListQuery{ContextID: "ctx_b", After: epoch.Add(2 * time.Second)}, []a2a.TaskID{"tsk_05"}, 1},
		{"after and state", store.ListQuery{State: a2a.TaskStateWorking, After: epoch.Add(2 * time.Second)}, []a2a.TaskID{"tsk_03"}, 1},
		{"nothing matches", store.ListQuery{ContextID: "ctx_none"}, []a2a.TaskID{}, 0},
		{"a state no task is in", store.ListQuery{State: a2a.TaskStateRejected}, []a2a.TaskID{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.PageSize = a2a.MaxPageSize
			page, err := s.ListInScope(t.Context(), tt.q, store.OperatorScope())
			if err != nil {
				t.Fatalf("ListInScope: %v", err)
			}
			if diff := cmp.Diff(tt.want, taskIDs(page.Tasks)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if page.Total != tt.total {
				t.Errorf("Total = %d, want %d", page.Total, tt.total)
			}
			if page.NextPageToken != "" {
				t.Errorf("NextPageToken = %q on the only page", page.NextPageToken)
			}
		})
	}

	t.Run("whole tasks", func(t *testing.T) {
		page, err := s.ListInScope(t.Context(), store.ListQuery{ContextID: "ctx_a", PageSize: 10}, store.OperatorScope())
		if err != nil {
			t.Fatalf("ListInScope: %v", err)
		}
		want := []*a2a.Task{task(4, "ctx_a", a2a.TaskStateFailed), task(3, "ctx_a", a2a.TaskStateWorking), task(1, "ctx_a", a2a.TaskStateCompleted)}
		if diff := cmp.Diff(want, page.Tasks); diff != "" {
			t.Errorf("tasks (-want +got):\n%s", diff)
		}
	})
}

// A peer's scope lists only the tasks it sent, the operator's every task (a Caller in the query keeps
// one member's), the zero scope none.
func testListScope(t *testing.T, open opener) {
	s := open(t)
	callers := []string{"", "lead", "critic", "lead", ""}
	for n, caller := range callers {
		create(t, s, peerTask(n+1, caller))
	}
	for _, tt := range []struct {
		name string
		q    store.ListQuery
		sc   store.Scope
		want []a2a.TaskID
	}{
		{"operator", store.ListQuery{}, store.OperatorScope(), []a2a.TaskID{"tsk_05", "tsk_04", "tsk_03", "tsk_02", "tsk_01"}},
		{"operator, one caller", store.ListQuery{Caller: "lead"}, store.OperatorScope(), []a2a.TaskID{"tsk_04", "tsk_02"}},
		{"lead", store.ListQuery{}, store.PeerScope("lead"), []a2a.TaskID{"tsk_04", "tsk_02"}},
		{"critic", store.ListQuery{}, store.PeerScope("critic"), []a2a.TaskID{"tsk_03"}},
		{"lead, by context", store.ListQuery{ContextID: "ctx"}, store.PeerScope("lead"), []a2a.TaskID{"tsk_04", "tsk_02"}},
		{"lead, after", store.ListQuery{After: epoch.Add(3 * time.Second)}, store.PeerScope("lead"), []a2a.TaskID{"tsk_04"}},
		{"a member that sent nothing", store.ListQuery{}, store.PeerScope("nobody"), []a2a.TaskID{}},
		{"zero", store.ListQuery{}, store.Scope{}, []a2a.TaskID{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{1, a2a.MaxPageSize} {
				tt.q.PageSize = size
				pages, total := listAll(t, s, tt.q, tt.sc)
				got := []a2a.TaskID{}
				for _, p := range pages {
					got = append(got, p...)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("page size %d: ids (-want +got):\n%s", size, diff)
				}
				if total != len(tt.want) {
					t.Errorf("page size %d: Total = %d, want %d", size, total, len(tt.want))
				}
			}
		})
	}

	// A query naming another member than the scope's never widens the scope.
	t.Run("a peer's query for another caller", func(t *testing.T) {
		page, err := s.ListInScope(t.Context(), store.ListQuery{Caller: "critic", PageSize: 10}, store.PeerScope("lead"))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if c := store.TaskCaller(task); c != "lead" {
				t.Errorf("lead's scope listed %s, sent by %q", task.ID, c)
			}
		}
	})
}

// Pages: small page sizes walk every task once, newest first, each page full but the last, every page
// with the total; an exact fit has no empty last page; a page token is good for another page size.
func testPages(t *testing.T, open opener) {
	s := open(t)
	type made struct {
		id      a2a.TaskID
		context string
		state   a2a.TaskState
		at      time.Time
		caller  string
	}
	var all []made // in creation order
	states := []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateWorking, a2a.TaskStateFailed}
	for n := 1; n <= 11; n++ {
		tk := task(n, []string{"ctx_a", "ctx_b"}[n%2], states[n%3])
		caller := []string{"", "lead", "critic"}[n%3]
		if caller != "" {
			tk.Metadata = peerTask(n, caller).Metadata
		}
		create(t, s, tk)
		all = append(all, made{tk.ID, tk.ContextID, tk.Status.State, tk.Status.Timestamp.Time, caller})
	}
	for _, tt := range []struct {
		name  string
		q     store.ListQuery
		sc    store.Scope
		keeps func(m made) bool
	}{
		{"no filter", store.ListQuery{}, store.OperatorScope(), func(made) bool { return true }},
		{"context", store.ListQuery{ContextID: "ctx_a"}, store.OperatorScope(), func(m made) bool { return m.context == "ctx_a" }},
		{"state", store.ListQuery{State: a2a.TaskStateWorking}, store.OperatorScope(), func(m made) bool { return m.state == a2a.TaskStateWorking }},
		{"after", store.ListQuery{After: epoch.Add(3 * time.Second)}, store.OperatorScope(), func(m made) bool { return m.at.After(epoch.Add(3 * time.Second)) }},
		{"every filter", store.ListQuery{ContextID: "ctx_b", State: a2a.TaskStateCompleted, After: epoch}, store.OperatorScope(),
			func(m made) bool {
				return m.context == "ctx_b" && m.state == a2a.TaskStateCompleted && m.at.After(epoch)
			}},
		{"a peer's scope", store.ListQuery{}, store.PeerScope("lead"), func(m made) bool { return m.caller == "lead" }},
	} {
		var want []a2a.TaskID
		for _, m := range slices.Backward(all) {
			if tt.keeps(m) {
				want = append(want, m.id)
			}
		}
		sizes := []int{1, 2, 3, len(want), len(want) + 1}
		slices.Sort(sizes)
		for _, size := range slices.Compact(sizes) {
			if size < 1 {
				continue
			}
			t.Run(tt.name+"/size "+strconv.Itoa(size), func(t *testing.T) {
				q := tt.q
				q.PageSize = size
				pages, total := listAll(t, s, q, tt.sc)
				wantPages := [][]a2a.TaskID{}
				for c := range slices.Chunk(want, size) {
					wantPages = append(wantPages, c)
				}
				if len(wantPages) == 0 {
					wantPages = [][]a2a.TaskID{{}}
				}
				if diff := cmp.Diff(wantPages, pages); diff != "" {
					t.Errorf("pages (-want +got):\n%s", diff)
				}
				if total != len(want) {
					t.Errorf("Total = %d, want %d", total, len(want))
				}
			})
		}
	}

	t.Run("another page size on the next page", func(t *testing.T) {
		first, err := s.ListInScope(t.Context(), store.ListQuery{ContextID: "ctx_a", PageSize: 1}, store.OperatorScope())
		if err != nil || first.NextPageToken == "" {
			t.Fatalf("first page: token %q, %v", first.NextPageToken, err)
		}
		next, err := s.ListInScope(t.Context(), store.ListQuery{ContextID: "ctx_a", PageSize: 10, PageToken: first.NextPageToken}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		want := []a2a.TaskID{"tsk_08", "tsk_06", "tsk_04", "tsk_02"}
		if diff := cmp.Diff(want, taskIDs(next.Tasks)); diff != "" || next.NextPageToken != "" {
			t.Errorf("the rest in one page (-want +got):\n%s\ntoken %q", diff, next.NextPageToken)
		}
	})
}

// A page token is refused (a2a.ErrInvalidParams, a violation of pageToken) for a filter other than its
// own, the scope's caller included, and when it is not one at all; it stays good, and the pages after it
// stay what they were, while tasks are added and ended.
func testPageTokens(t *testing.T, open opener) {
	s := open(t)
	for n := 1; n <= 5; n++ {
		tk := task(n, "ctx_a", a2a.TaskStateSubmitted)
		if n%2 == 0 {
			tk.Metadata = peerTask(n, "lead").Metadata
		}
		create(t, s, tk)
	}
	first, err := s.ListInScope(t.Context(), store.ListQuery{ContextID: "ctx_a", PageSize: 1}, store.OperatorScope())
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: token %q, %v", first.NextPageToken, err)
	}
	token := first.NextPageToken
	leads, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 1}, store.PeerScope("lead"))
	if err != nil || leads.NextPageToken == "" {
		t.Fatalf("lead's first page: token %q, %v", leads.NextPageToken, err)
	}
	for _, tt := range []struct {
		name string
		q    store.ListQuery
		sc   store.Scope
	}{
		{"not a token", store.ListQuery{ContextID: "ctx_a", PageToken: "not a token!"}, store.OperatorScope()},
		{"a token cut short", store.ListQuery{ContextID: "ctx_a", PageToken: token[:len(token)/2]}, store.OperatorScope()},
		{"another context", store.ListQuery{ContextID: "ctx_b", PageToken: token}, store.OperatorScope()},
		{"no context", store.ListQuery{PageToken: token}, store.OperatorScope()},
		{"a state added", store.ListQuery{ContextID: "ctx_a", State: a2a.TaskStateSubmitted, PageToken: token}, store.OperatorScope()},
		{"after added", store.ListQuery{ContextID: "ctx_a", After: epoch, PageToken: token}, store.OperatorScope()},
		{"a caller added", store.ListQuery{ContextID: "ctx_a", Caller: "lead", PageToken: token}, store.OperatorScope()},
		{"a peer's token in the operator's scope", store.ListQuery{PageToken: leads.NextPageToken}, store.OperatorScope()},
		{"the operator's token in a peer's scope", store.ListQuery{ContextID: "ctx_a", PageToken: token}, store.PeerScope("lead")},
	} {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			tt.q.PageSize = 1
			_, err := s.ListInScope(t.Context(), tt.q, tt.sc)
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("err = %v, want one wrapping a2a.ErrInvalidParams", err)
			}
			var wire *a2a.Error
			if !errors.As(err, &wire) || len(wire.Violations) != 1 || wire.Violations[0].Field != "pageToken" {
				t.Errorf("err = %v, want a field violation of pageToken", err)
			}
		})
	}

	t.Run("a peer's token in its scope", func(t *testing.T) {
		next, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 10, PageToken: leads.NextPageToken}, store.PeerScope("lead"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]a2a.TaskID{"tsk_02"}, taskIDs(next.Tasks)); diff != "" {
			t.Errorf("lead's second page (-want +got):\n%s", diff)
		}
	})

	t.Run("stable while tasks are added and ended", func(t *testing.T) {
		q := store.ListQuery{PageSize: 2}
		firstPage, err := s.ListInScope(t.Context(), q, store.OperatorScope())
		if err != nil || firstPage.NextPageToken == "" {
			t.Fatalf("first page: token %q, %v", firstPage.NextPageToken, err)
		}
		if diff := cmp.Diff([]a2a.TaskID{"tsk_05", "tsk_04"}, taskIDs(firstPage.Tasks)); diff != "" {
			t.Fatalf("first page (-want +got):\n%s", diff)
		}
		create(t, s, task(6, "ctx_a", a2a.TaskStateSubmitted), task(7, "ctx_b", a2a.TaskStateSubmitted))
		if ended, err := s.EndAll(t.Context(), []a2a.TaskID{"tsk_03", "tsk_05"}, a2a.TaskStateCanceled, "ended", epoch.Add(time.Hour)); err != nil || len(ended) != 2 {
			t.Fatalf("EndAll: %v, %v", ended, err)
		}
		q.PageToken = firstPage.NextPageToken
		pages, total := listAll(t, s, q, store.OperatorScope())
		if diff := cmp.Diff([][]a2a.TaskID{{"tsk_03", "tsk_02"}, {"tsk_01"}}, pages); diff != "" {
			t.Errorf("the pages after the first (-want +got):\n%s", diff)
		}
		if total != 7 {
			t.Errorf("Total = %d, want 7 (the tasks added counted)", total)
		}
		// A filtered walk begun before the changes goes on where it stopped: the tasks ended since keep
		// their places, the tasks added are newer than its cursor.
		fq := store.ListQuery{ContextID: "ctx_a", PageSize: 1, PageToken: token}
		pages, total = listAll(t, s, fq, store.OperatorScope())
		if diff := cmp.Diff([][]a2a.TaskID{{"tsk_04"}, {"tsk_03"}, {"tsk_02"}, {"tsk_01"}}, pages); diff != "" {
			t.Errorf("ctx_a's pages after its first (-want +got):\n%s", diff)
		}
		if total != 6 {
			t.Errorf("ctx_a's Total = %d, want 6", total)
		}
	})
}
