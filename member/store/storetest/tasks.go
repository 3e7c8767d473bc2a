package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// A task round-trips whole through Create and Get (and GetInScope's bytes are its JSON); the store keeps
// a copy of what it was handed, and Get returns a copy the caller may change.
func testCreateGet(t *testing.T, open opener) {
	s := open(t)
	for _, tt := range []struct {
		name string
		task *a2a.Task
	}{
		{"every field", fullTask()},
		{"no timestamp", &a2a.Task{ID: "tsk_bare", ContextID: "ctx_bare", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}},
		{"plain", task(1, "ctx_a", a2a.TaskStateWorking)},
		{"a peer's", peerTask(2, "lead")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := clone(t, tt.task)
			create(t, s, tt.task)
			checkStored(t, s, want, "after Create")
		})
	}

	t.Run("copies", func(t *testing.T) {
		handed := fullTask()
		handed.ID = "tsk_copied"
		handed.History[0].MessageID = "msg_copied" // a task of its own message: a replica's store keeps one per message
		want := clone(t, handed)
		create(t, s, handed)
		// The caller changes what it handed over, deep inside.
		handed.Status.State = a2a.TaskStateFailed
		*handed.History[0].Parts[0].Text = "changed by the caller"
		handed.Metadata["murmur"].(map[string]any)["member"] = "changed"
		checkStored(t, s, want, "after the caller changed the task it created")

		got := get(t, s, want.ID)
		got.Status.State = a2a.TaskStateCanceled
		*got.History[0].Parts[0].Text = "changed by a reader"
		got.History = append(got.History, got.History[0])
		got.Metadata["murmur"].(map[string]any)["member"] = "changed"
		got.Artifacts[1].Parts[0].Raw[0] = 42
		checkStored(t, s, want, "after a reader changed what Get returned")
	})
}

// Create refuses a task without an id and a task whose id is stored, and leaves the stored one alone.
func testCreateRefuses(t *testing.T, open opener) {
	s := open(t)
	first := task(1, "ctx_a", a2a.TaskStateSubmitted)
	create(t, s, first)
	for _, tt := range []struct {
		name string
		task *a2a.Task
	}{
		{"duplicate id", task(1, "ctx_b", a2a.TaskStateWorking)},
		{"no id", &a2a.Task{ContextID: "ctx_a", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Create(t.Context(), tt.task); err == nil {
				t.Error("Create succeeded, want an error")
			}
			checkStored(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted), "after a refused Create")
			page, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 10}, store.OperatorScope())
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != 1 || len(page.Tasks) != 1 {
				t.Errorf("after a refused Create the store lists %d tasks (total %d), want 1", len(page.Tasks), page.Total)
			}
		})
	}
}

// Update replaces the stored task whole; List follows its state; the store keeps a copy.
func testUpdate(t *testing.T, open opener) {
	s := open(t)
	create(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted))
	working := task(1, "ctx_a", a2a.TaskStateWorking)
	working.Status.Timestamp = a2a.NewTimestamp(epoch.Add(time.Hour))
	completed := fullTask()
	completed.ID, completed.ContextID = "tsk_01", "ctx_a"
	for _, handed := range []*a2a.Task{working, completed} {
		want := clone(t, handed)
		if err := s.Update(t.Context(), handed); err != nil {
			t.Fatalf("Update to %s: %v", want.Status.State, err)
		}
		handed.Status.State = a2a.TaskStateRejected // the caller's own again
		handed.Metadata = map[string]any{"changed": true}
		checkStored(t, s, want, "after Update to "+string(want.Status.State))
	}
	for state, n := range map[a2a.TaskState]int{a2a.TaskStateCompleted: 1, a2a.TaskStateSubmitted: 0, a2a.TaskStateWorking: 0} {
		page, err := s.ListInScope(t.Context(), store.ListQuery{State: state, PageSize: 10}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != n || len(page.Tasks) != n {
			t.Errorf("List by state %s after the updates: total %d, %d tasks; want %d", state, page.Total, len(page.Tasks), n)
		}
	}
	page, err := s.ListInScope(t.Context(), store.ListQuery{After: epoch.Add(2 * time.Second), PageSize: 10}, store.OperatorScope())
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 0 {
		t.Errorf("List after the first status timestamp: total %d, want 0 (the timestamp followed Update)", page.Total)
	}
}

// UpdateAll stores each task as Update does and answers each one's error, in order: a task not stored
// fails alone.
func testUpdateAll(t *testing.T, open opener) {
	s := open(t)
	create(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted), task(2, "ctx_a", a2a.TaskStateSubmitted), task(3, "ctx_b", a2a.TaskStateWorking))
	ts := []*a2a.Task{
		task(1, "ctx_a", a2a.TaskStateCompleted), task(8, "ctx_a", a2a.TaskStateCanceled),
		task(3, "ctx_b", a2a.TaskStateCanceled), task(2, "ctx_a", a2a.TaskStateWorking),
	}
	errs := s.UpdateAll(t.Context(), ts)
	if len(errs) != len(ts) {
		t.Fatalf("UpdateAll of %d tasks answered %d errors", len(ts), len(errs))
	}
	for i, err := range errs {
		if ts[i].ID == "tsk_08" {
			checkNotFound(t, "UpdateAll's error for a task not stored", err, "tsk_08")
			continue
		}
		if err != nil {
			t.Errorf("UpdateAll's error for %s: %v", ts[i].ID, err)
		}
		checkStored(t, s, ts[i], "after UpdateAll")
	}
	if _, err := s.Get(t.Context(), "tsk_08"); err == nil {
		t.Error("UpdateAll stored a task it was asked to update but did not hold")
	}
	page, err := s.ListInScope(t.Context(), store.ListQuery{State: a2a.TaskStateCanceled, PageSize: 10}, store.OperatorScope())
	if err != nil || page.Total != 1 {
		t.Errorf("List canceled after UpdateAll: total %d (%v), want 1", page.Total, err)
	}
	if errs := s.UpdateAll(t.Context(), nil); len(errs) != 0 {
		t.Errorf("UpdateAll of nothing answered %v", errs)
	}
}

// Every way of naming a task the store does not hold answers the one "not found"; a task outside the
// scope is answered exactly as one not stored.
func testNotFound(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	create(t, s, peerTask(1, ""), peerTask(2, "lead"))
	for _, tt := range []struct {
		name string
		id   a2a.TaskID
		call func() error
	}{
		{"Get", "tsk_07", func() error { _, err := s.Get(ctx, "tsk_07"); return err }},
		{"Update", "tsk_07", func() error { return s.Update(ctx, task(7, "ctx_a", a2a.TaskStateWorking)) }},
		{"UpdateAll", "tsk_07", func() error {
			errs := s.UpdateAll(ctx, []*a2a.Task{task(7, "ctx_a", a2a.TaskStateWorking)})
			if len(errs) != 1 {
				return fmt.Errorf("UpdateAll of one task answered %d errors", len(errs))
			}
			return errs[0]
		}},
		{"UpdateLater", "tsk_07", func() error { return s.UpdateLater(ctx, task(7, "ctx_a", a2a.TaskStateWorking))() }},
		{"GetInScope not stored", "tsk_07", func() error { _, err := s.GetInScope(ctx, "tsk_07", store.OperatorScope()); return err }},
		{"GetInScope another peer's", "tsk_02", func() error { _, err := s.GetInScope(ctx, "tsk_02", store.PeerScope("critic")); return err }},
		{"GetInScope the operator's, for a peer", "tsk_01", func() error { _, err := s.GetInScope(ctx, "tsk_01", store.PeerScope("lead")); return err }},
		{"GetInScope the zero scope", "tsk_02", func() error { _, err := s.GetInScope(ctx, "tsk_02", store.Scope{}); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) { checkNotFound(t, tt.name, tt.call(), tt.id) })
	}

	// What a peer sees of a task outside its scope is what it sees of a task never stored: the same text
	// and the same wire error, but for the id it asked about.
	t.Run("outside the scope is not stored", func(t *testing.T) {
		seen := func(id a2a.TaskID, sc store.Scope) (text, wire string) {
			_, err := s.GetInScope(ctx, id, sc)
			if err == nil {
				t.Fatalf("GetInScope %s succeeded", id)
			}
			w, jerr := json.Marshal(a2a.ToJSONRPC(err))
			if jerr != nil {
				t.Fatal(jerr)
			}
			return strings.ReplaceAll(err.Error(), string(id), "<id>"), strings.ReplaceAll(string(w), string(id), "<id>")
		}
		notText, notWire := seen("tsk_99", store.PeerScope("critic"))
		for _, sc := range []struct {
			name string
			sc   store.Scope
		}{{"another peer's scope", store.PeerScope("critic")}, {"the zero scope", store.Scope{}}} {
			text, wire := seen("tsk_02", sc.sc)
			if text != notText {
				t.Errorf("%s: a task outside it reads %q, a task not stored %q", sc.name, text, notText)
			}
			if wire != notWire {
				t.Errorf("%s: a task outside it is on the wire\n%s\na task not stored\n%s", sc.name, wire, notWire)
			}
		}
	})
}

// GetInScope answers a task in scope as its JSON, exactly as a2a.Task marshals it: the operator sees
// every task, a peer the tasks it sent.
func testGetInScope(t *testing.T, open opener) {
	s := open(t)
	full := fullTask()
	full.Metadata["murmur"].(map[string]any)["caller"] = "lead"
	tasks := []*a2a.Task{peerTask(1, ""), peerTask(2, "lead"), peerTask(3, "critic"), full}
	create(t, s, tasks...)
	for _, tt := range []struct {
		name string
		sc   store.Scope
		sees []bool
	}{
		{"operator", store.OperatorScope(), []bool{true, true, true, true}},
		{"lead", store.PeerScope("lead"), []bool{false, true, false, true}},
		{"critic", store.PeerScope("critic"), []bool{false, false, true, false}},
		{"a member that sent nothing", store.PeerScope("nobody"), []bool{false, false, false, false}},
		{"zero", store.Scope{}, []bool{false, false, false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i, task := range tasks {
				body, err := s.GetInScope(t.Context(), task.ID, tt.sc)
				if !tt.sees[i] {
					checkNotFound(t, "GetInScope "+string(task.ID), err, task.ID)
					continue
				}
				if err != nil {
					t.Errorf("GetInScope %s: %v", task.ID, err)
					continue
				}
				if want := mustMarshal(t, task); string(body) != want {
					t.Errorf("GetInScope %s answered\n%s\nwant\n%s", task.ID, body, want)
				}
			}
		})
	}
}

// GetAll answers the stored tasks of ids in the order of ids, leaving out those not stored, as they
// stand after updates.
func testGetAll(t *testing.T, open opener) {
	s := open(t)
	var tasks []*a2a.Task
	for n := 1; n <= 5; n++ {
		tasks = append(tasks, task(n, "ctx_a", a2a.TaskStateSubmitted))
	}
	create(t, s, tasks...)
	tasks[3] = task(4, "ctx_a", a2a.TaskStateCompleted)
	if err := s.Update(t.Context(), tasks[3]); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ids  []a2a.TaskID
		want []*a2a.Task
	}{
		{"in the order asked, skipping what is not stored", []a2a.TaskID{"tsk_05", "tsk_missing", "tsk_02", "tsk_04", "tsk_none", "tsk_01"},
			[]*a2a.Task{tasks[4], tasks[1], tasks[3], tasks[0]}},
		{"none stored", []a2a.TaskID{"tsk_missing", "tsk_none"}, []*a2a.Task{}},
		{"nothing asked", nil, []*a2a.Task{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetAll(t.Context(), tt.ids)
			if err != nil {
				t.Fatalf("GetAll: %v", err)
			}
			if got == nil {
				got = []*a2a.Task{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GetAll (-want +got):\n%s", diff)
			}
		})
	}
}

// Creates from many goroutines at once are all stored.
func testConcurrentCreate(t *testing.T, open opener) {
	s := open(t)
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Create(t.Context(), task(i+1, "ctx_a", a2a.TaskStateSubmitted)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %d: %v", i+1, err)
		}
	}
	for i := range n {
		checkStored(t, s, task(i+1, "ctx_a", a2a.TaskStateSubmitted), "after concurrent Creates")
	}
	page, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: a2a.MaxPageSize}, store.OperatorScope())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if page.Total != n || len(page.Tasks) != n {
		t.Errorf("stored %d tasks (listed %d), want %d", page.Total, len(page.Tasks), n)
	}
}

// Ping reports an open store readable.
func testPing(t *testing.T, open opener) {
	s := open(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping of an open store: %v", err)
	}
	create(t, s, task(1, "ctx_a", a2a.TaskStateSubmitted))
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping of a store holding a task: %v", err)
	}
}

// testGetByMessage: a task is found by the message that created it and the member that sent it (a
// retried SendMessage), the newest when a message created two; another caller's message of the same id,
// a rejected task, an unknown id and "" are not found.
func testGetByMessage(t *testing.T, open opener) {
	s := open(t)
	ctx := context.Background()
	mine := peerTask(1, "caller")
	mine.History[0].MessageID = "msg_retried"
	theirs := peerTask(2, "other")
	theirs.History[0].MessageID = "msg_retried"
	op := task(3, "ctx", a2a.TaskStateWorking)
	op.History[0].MessageID = "msg_retried"
	rejected := peerTask(4, "caller")
	rejected.History[0].MessageID = "msg_refused"
	rejected.Status.State = a2a.TaskStateRejected
	create(t, s, mine, theirs, op, rejected)
	for _, tc := range []struct {
		caller, message string
		want            a2a.TaskID // "" when none is found
	}{
		{"caller", "msg_retried", mine.ID},
		{"other", "msg_retried", theirs.ID},
		{"", "msg_retried", op.ID},
		{"caller", "msg_refused", ""},
		{"stranger", "msg_retried", ""},
		{"caller", "msg_unknown", ""},
		{"caller", "", ""},
	} {
		got, err := s.GetByMessage(ctx, tc.caller, tc.message)
		switch {
		case tc.want == "" && !errors.Is(err, store.ErrNotFound):
			t.Errorf("GetByMessage(%q, %q) = %v, %v; want not found", tc.caller, tc.message, got, err)
		case tc.want != "" && (err != nil || got.ID != tc.want):
			t.Errorf("GetByMessage(%q, %q) = %v, %v; want %s", tc.caller, tc.message, got, err, tc.want)
		}
	}
	// A second task of one message: a store of one process keeps it, and GetByMessage finds the newest
	// task a message created, as it stands now; a replica's store keeps one task per message (DESIGN
	// §16: copies reaching two replicas at once) and refuses it with ErrSentBefore.
	again := peerTask(5, "caller")
	again.History[0].MessageID = "msg_retried"
	if err := s.Create(ctx, again); errors.Is(err, store.ErrSentBefore) {
		if got, err := s.GetByMessage(ctx, "caller", "msg_retried"); err != nil || got.ID == again.ID {
			t.Errorf("GetByMessage after a refused second task of the message: %v, %v; want the first", got, err)
		}
		return
	} else if err != nil {
		t.Fatal(err)
	}
	again.Status.State = a2a.TaskStateCanceled
	if err := s.Update(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetByMessage(ctx, "caller", "msg_retried"); err != nil || got.ID != again.ID || got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("GetByMessage after a second task of the message: %v, %v; want %s, canceled", got, err, again.ID)
	}
}
