package store

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// TestEndAll ends stored tasks in place and finds each one's JSON byte for byte what Update would have
// stored for the task with that status (decoded, its status set, marshalled), leaves out ids the store
// does not hold, ends an id given twice once, keeps the counts of List right and drops the cache's stale
// copies.
func TestEndAll(t *testing.T) {
	s := openTestStore(t)
	ctx := t.Context()
	full := fullTask()
	full.Status = a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: a2a.NewTimestamp(storeEpoch)}
	full.History[0].Parts = []a2a.Part{a2a.TextPart(`<b>&amp; "quoted" \ slash ✓ ` + "\u2028")}
	full.Metadata["big"] = 12345678901234567890.0 // marshals as 12345678901234567000
	full.Metadata["murmur"].(map[string]any)["caller"] = "alpha"
	tasks := []*a2a.Task{storeTask(1, "ctx_<a>&", a2a.TaskStateSubmitted), full, storeTask(2, "", a2a.TaskStateSubmitted),
		storeTask(3, "ctx_b", a2a.TaskStateWorking)}
	before := map[a2a.TaskID][]byte{}
	for _, task := range tasks {
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		before[task.ID] = []byte(storedJSON(t, s, task.ID))
	}
	if _, err := s.Get(ctx, tasks[0].ID); err != nil { // cached
		t.Fatal(err)
	}
	var hooked int
	s.SetWriteHook(func(op string, rows int) {
		if op == opUpdate {
			hooked += rows
		}
	})
	now := storeEpoch.Add(time.Hour + 1234567*time.Microsecond)
	ask := []a2a.TaskID{tasks[0].ID, "tsk_missing", full.ID, tasks[2].ID, full.ID}
	ended, err := s.EndAll(ctx, ask, a2a.TaskStateCanceled, "member shutting down: <canceled>", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []a2a.TaskID{tasks[0].ID, full.ID, tasks[2].ID}; !slices.Equal(ended, want) {
		t.Fatalf("EndAll ended %v, want %v", ended, want)
	}
	if hooked != 3 {
		t.Errorf("the write hook saw %d updated rows, want 3", hooked)
	}
	msgIDs := map[a2a.MessageID]bool{}
	for _, id := range ended {
		got := storedJSON(t, s, id)
		var stored a2a.Task
		if err := json.Unmarshal([]byte(got), &stored); err != nil {
			t.Fatal(err)
		}
		if stored.Status.Message == nil {
			t.Fatalf("%s: no status message: %s", id, got)
		}
		msgIDs[stored.Status.Message.MessageID] = true
		// What the session's per-task path stores: the task decoded, its status set, marshalled again.
		want, err := Decode(id, before[id])
		if err != nil {
			t.Fatal(err)
		}
		want.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: a2a.NewTimestamp(now),
			Message: &a2a.Message{MessageID: stored.Status.Message.MessageID, Role: a2a.RoleAgent,
				Parts: []a2a.Part{a2a.TextPart("member shutting down: <canceled>")}, TaskID: id, ContextID: want.ContextID}}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(wantJSON) {
			t.Errorf("%s stored\n%s\nwant\n%s", id, got, wantJSON)
		}
		// Get (the cache dropped its copy) answers the ended task too.
		g, err := s.getJSON(ctx, id)
		if err != nil || string(g) != got {
			t.Errorf("getJSON(%s) = %s, %v; want the ended task", id, g, err)
		}
		var ts int64
		if err := s.read.QueryRowContext(ctx, `SELECT status_ts FROM tasks WHERE id = ?`, string(id)).Scan(&ts); err != nil || ts != now.UnixMilli() {
			t.Errorf("%s: status_ts %d, %v; want %d", id, ts, err, now.UnixMilli())
		}
	}
	if len(msgIDs) != len(ended) {
		t.Errorf("the status messages share ids: %v", msgIDs)
	}
	// The full task, field by field.
	g, err := s.Get(ctx, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status.State != a2a.TaskStateCanceled || g.Status.Message.Text() != "member shutting down: <canceled>" ||
		g.Status.Message.ContextID != full.ContextID || g.Status.Message.TaskID != full.ID || !g.Status.Timestamp.Equal(a2a.NewTimestamp(now).Time) {
		t.Errorf("the full task's status: %+v", g.Status)
	}
	if len(g.History) != 2 || len(g.Artifacts) != 2 || ids.Get(ids.Murmur(g.Metadata), "caller") != "alpha" {
		t.Errorf("the full task lost some of what it held: %+v", g)
	}
	// Untouched: the task not asked for.
	if got := storedJSON(t, s, tasks[3].ID); got != string(before[tasks[3].ID]) {
		t.Errorf("a task not asked for changed: %s", got)
	}
	for state, want := range map[a2a.TaskState]int{a2a.TaskStateCanceled: 3, a2a.TaskStateSubmitted: 0, a2a.TaskStateWorking: 1} {
		page, err := s.list(ctx, ListQuery{State: state, PageSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != want || len(page.Tasks) != want {
			t.Errorf("List(%s): total %d, %d tasks; want %d", state, page.Total, len(page.Tasks), want)
		}
	}
	// No text: no status message, as setStatus does.
	if ended, err := s.EndAll(ctx, []a2a.TaskID{tasks[3].ID}, a2a.TaskStateFailed, "", now); err != nil || len(ended) != 1 {
		t.Fatalf("EndAll: %v, %v", ended, err)
	}
	want, _ := Decode(tasks[3].ID, before[tasks[3].ID])
	want.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: a2a.NewTimestamp(now)}
	if wantJSON, _ := json.Marshal(want); storedJSON(t, s, tasks[3].ID) != string(wantJSON) {
		t.Errorf("ended without a message: %s, want %s", storedJSON(t, s, tasks[3].ID), wantJSON)
	}
	if ended, err := s.EndAll(ctx, []a2a.TaskID{"tsk_none"}, a2a.TaskStateCanceled, "x", now); err != nil || len(ended) != 0 {
		t.Errorf("EndAll of a task not stored: %v, %v", ended, err)
	}
}

// BenchmarkEndAll ends 20,000 stored submitted tasks at once, as a shutdown does:
//
//	go test -run '^$' -bench EndAll -benchtime 3x ./member/store/
func BenchmarkEndAll(b *testing.B) {
	const n = 20_000
	for range b.N {
		b.StopTimer()
		s := openTestStore(b)
		ctx := b.Context()
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		queued := make([]a2a.TaskID, n)
		for i := range queued {
			task := storeTask(i, "ctx_bench", a2a.TaskStateSubmitted)
			task.ID = a2a.TaskID(ids.New(ids.PrefixTask))
			task.Metadata = map[string]any{"murmur": map[string]any{"origin": "operator", "trust": "trusted"}}
			body, _ := json.Marshal(task)
			if err := insertTask(ctx, tx, task, body, storeEpoch); err != nil {
				b.Fatal(err)
			}
			queued[i] = task.ID
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		ended, err := s.EndAll(ctx, queued, a2a.TaskStateCanceled, "task canceled: the member shut down", storeEpoch.Add(time.Hour))
		if err != nil || len(ended) != n {
			b.Fatalf("EndAll: %d, %v", len(ended), err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/endall")
	}
	b.ReportMetric(0, "ns/op")
}
