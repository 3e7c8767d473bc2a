package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// ended is task as EndAll or Recover leave it: its status state, a message of the agent's holding
// text (none when text is empty) whose id is msgID, and the timestamp now.
func ended(t *testing.T, task *a2a.Task, state a2a.TaskState, text string, msgID a2a.MessageID, now time.Time) *a2a.Task {
	want := clone(t, task)
	want.Status = a2a.TaskStatus{State: state, Timestamp: a2a.NewTimestamp(now)}
	if text != "" {
		want.Status.Message = &a2a.Message{
			MessageID: msgID,
			Role:      a2a.RoleAgent,
			Parts:     []a2a.Part{a2a.TextPart(text)},
			TaskID:    task.ID,
			ContextID: task.ContextID,
		}
	}
	return want
}

// statusMessageID is the id of the stored task's status message; it fails the test when it has none.
func statusMessageID(t *testing.T, s store.Tasks, id a2a.TaskID) a2a.MessageID {
	t.Helper()
	got := get(t, s, id)
	if got.Status.Message == nil {
		t.Errorf("%s: no status message: %+v", id, got.Status)
		return ""
	}
	checkMessageID(t, string(id)+"'s status message", got.Status.Message.MessageID)
	return got.Status.Message.MessageID
}

// Recover ends failed, with store.RestartMessage and the given timestamp, every task not in a terminal
// state, and answers their ids in creation order; the terminal ones, and the rest of each task, stay as
// they were; List follows; a second Recover finds nothing.
func testRecover(t *testing.T, open opener) {
	t.Run("an empty store", func(t *testing.T) {
		s := open(t)
		changed, err := s.Recover(t.Context(), epoch)
		if err != nil || len(changed) != 0 {
			t.Errorf("Recover of an empty store: %v, %v", changed, err)
		}
	})

	s := open(t)
	states := []a2a.TaskState{
		a2a.TaskStateCompleted, a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateSubmitted,
		a2a.TaskStateCanceled, a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateAuthRequired,
	}
	// Ids in the reverse of creation order, so the order answered is seen to be the store's.
	var tasks []*a2a.Task
	for i, state := range states {
		tasks = append(tasks, task(len(states)-i, "ctx_a", state))
	}
	full := fullTask()
	full.Status.State = a2a.TaskStateWorking
	full.Metadata["murmur"].(map[string]any)["caller"] = "lead"
	tasks = append(tasks, full)
	create(t, s, tasks...)

	now := epoch.Add(time.Hour + 1500*time.Microsecond)
	changed, err := s.Recover(t.Context(), now)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	var wantIDs []a2a.TaskID
	for _, task := range tasks {
		if !task.Status.State.Terminal() {
			wantIDs = append(wantIDs, task.ID)
		}
	}
	if diff := cmp.Diff(wantIDs, changed); diff != "" {
		t.Errorf("Recover's ids, in creation order (-want +got):\n%s", diff)
	}
	msgIDs := map[a2a.MessageID]bool{}
	for _, task := range tasks {
		if task.Status.State.Terminal() {
			checkStored(t, s, task, "a terminal task after Recover")
			continue
		}
		msgID := statusMessageID(t, s, task.ID)
		msgIDs[msgID] = true
		checkStored(t, s, ended(t, task, a2a.TaskStateFailed, store.RestartMessage, msgID, now), "a recovered task")
	}
	if len(msgIDs) != len(wantIDs) {
		t.Errorf("the recovered tasks' status messages share ids: %v", msgIDs)
	}
	if _, err := s.GetInScope(t.Context(), full.ID, store.PeerScope("lead")); err != nil {
		t.Errorf("after Recover the task lead sent is not in lead's scope: %v", err)
	}
	page, err := s.ListInScope(t.Context(), store.ListQuery{State: a2a.TaskStateFailed, After: now.Add(-time.Millisecond), PageSize: 20}, store.OperatorScope())
	if err != nil {
		t.Fatalf("ListInScope: %v", err)
	}
	if page.Total != len(wantIDs) || len(page.Tasks) != len(wantIDs) {
		t.Errorf("List of the recovered (failed, after now): total %d, %d tasks; want %d", page.Total, len(page.Tasks), len(wantIDs))
	}

	again, err := s.Recover(t.Context(), now.Add(time.Minute))
	if err != nil {
		t.Fatalf("second Recover: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("second Recover changed %v, want nothing", again)
	}
}

// EndAll ends every task of ids the store holds, once each, in the order of ids, with a status message
// of its own holding text and the timestamp now, leaving the rest of each task (and the tasks not asked
// for) as they were; List follows.
func testEndAll(t *testing.T, open opener) {
	s := open(t)
	ctx := t.Context()
	full := fullTask()
	full.Status = a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: a2a.NewTimestamp(epoch)}
	full.Metadata["murmur"].(map[string]any)["caller"] = "alpha"
	tasks := []*a2a.Task{
		task(1, "ctx_<a>&", a2a.TaskStateSubmitted), full, task(2, "", a2a.TaskStateSubmitted),
		task(3, "ctx_b", a2a.TaskStateWorking), task(4, "ctx_b", a2a.TaskStateCompleted),
	}
	create(t, s, tasks...)
	if _, err := s.Get(ctx, tasks[0].ID); err != nil { // read once before, as a cache would keep it
		t.Fatal(err)
	}

	const text = `member shutting down: <canceled> & "quoted" ✓`
	now := epoch.Add(time.Hour + 1234567*time.Microsecond)
	ask := []a2a.TaskID{tasks[0].ID, "tsk_missing", full.ID, tasks[2].ID, full.ID}
	got, err := s.EndAll(ctx, ask, a2a.TaskStateCanceled, text, now)
	if err != nil {
		t.Fatalf("EndAll: %v", err)
	}
	if diff := cmp.Diff([]a2a.TaskID{tasks[0].ID, full.ID, tasks[2].ID}, got); diff != "" {
		t.Fatalf("EndAll's ids (-want +got):\n%s", diff)
	}
	msgIDs := map[a2a.MessageID]bool{}
	for _, task := range tasks[:3] {
		msgID := statusMessageID(t, s, task.ID)
		msgIDs[msgID] = true
		checkStored(t, s, ended(t, task, a2a.TaskStateCanceled, text, msgID, now), "a task EndAll ended")
	}
	if len(msgIDs) != 3 {
		t.Errorf("the status messages share ids: %v", msgIDs)
	}
	if _, err := s.GetInScope(ctx, full.ID, store.PeerScope("alpha")); err != nil {
		t.Errorf("after EndAll the task alpha sent is not in alpha's scope: %v", err)
	}
	checkStored(t, s, tasks[3], "a task EndAll was not asked to end")
	checkStored(t, s, tasks[4], "a task EndAll was not asked to end")
	for state, want := range map[a2a.TaskState]int{a2a.TaskStateCanceled: 3, a2a.TaskStateSubmitted: 0, a2a.TaskStateWorking: 1} {
		page, err := s.ListInScope(ctx, store.ListQuery{State: state, PageSize: 10}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != want || len(page.Tasks) != want {
			t.Errorf("List(%s) after EndAll: total %d, %d tasks; want %d", state, page.Total, len(page.Tasks), want)
		}
	}
	page, err := s.ListInScope(ctx, store.ListQuery{After: now.Add(-time.Millisecond), PageSize: 10}, store.OperatorScope())
	if err != nil || page.Total != 3 {
		t.Errorf("List after the end's timestamp: total %d (%v), want the 3 ended", page.Total, err)
	}

	t.Run("no text, no status message", func(t *testing.T) {
		got, err := s.EndAll(ctx, []a2a.TaskID{tasks[3].ID}, a2a.TaskStateFailed, "", now)
		if err != nil || !cmp.Equal([]a2a.TaskID{tasks[3].ID}, got) {
			t.Fatalf("EndAll: %v, %v", got, err)
		}
		checkStored(t, s, ended(t, tasks[3], a2a.TaskStateFailed, "", "", now), "ended without text")
	})
	t.Run("a terminal task too", func(t *testing.T) {
		got, err := s.EndAll(ctx, []a2a.TaskID{tasks[4].ID}, a2a.TaskStateCanceled, "too late", now)
		if err != nil || !cmp.Equal([]a2a.TaskID{tasks[4].ID}, got) {
			t.Fatalf("EndAll of a completed task: %v, %v; want it ended", got, err)
		}
		checkStored(t, s, ended(t, tasks[4], a2a.TaskStateCanceled, "too late", statusMessageID(t, s, tasks[4].ID), now), "a completed task ended")
	})
	t.Run("none held", func(t *testing.T) {
		got, err := s.EndAll(ctx, []a2a.TaskID{"tsk_none", "tsk_missing"}, a2a.TaskStateCanceled, "x", now)
		if err != nil || len(got) != 0 {
			t.Errorf("EndAll of tasks not stored: %v, %v; want none ended", got, err)
		}
	})
	t.Run("no ids", func(t *testing.T) {
		got, err := s.EndAll(ctx, nil, a2a.TaskStateCanceled, "x", now)
		if err != nil || len(got) != 0 {
			t.Errorf("EndAll of no ids: %v, %v", got, err)
		}
	})
}
