package store

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

var storeEpoch = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

func openTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// storeTask returns task number n, whose status timestamp is n seconds after storeEpoch.
func storeTask(n int, contextID string, state a2a.TaskState) *a2a.Task {
	id := a2a.TaskID(fmt.Sprintf("tsk_%02d", n))
	return &a2a.Task{
		ID:        id,
		ContextID: contextID,
		Status: a2a.TaskStatus{
			State:     state,
			Timestamp: a2a.NewTimestamp(storeEpoch.Add(time.Duration(n) * time.Second)),
		},
		History: []a2a.Message{{
			MessageID: a2a.MessageID(fmt.Sprintf("msg_in_%02d", n)),
			Role:      a2a.RoleUser,
			Parts:     []a2a.Part{a2a.TextPart("question " + string(id))},
			ContextID: contextID,
			TaskID:    id,
		}},
	}
}

// fullTask sets every field a task can carry, so a round trip shows what the store keeps.
func fullTask() *a2a.Task {
	const id, ctxID = "tsk_full", "ctx_full"
	answer := a2a.Message{
		MessageID: "msg_answer",
		Role:      a2a.RoleAgent,
		Parts:     []a2a.Part{a2a.TextPart("the answer")},
		ContextID: ctxID,
		TaskID:    id,
		Metadata:  map[string]any{"tokens": 12.0},
	}
	return &a2a.Task{
		ID:        id,
		ContextID: ctxID,
		Status: a2a.TaskStatus{
			State:     a2a.TaskStateCompleted,
			Message:   &answer,
			Timestamp: a2a.NewTimestamp(storeEpoch.Add(1234567 * time.Microsecond)),
		},
		Artifacts: []a2a.Artifact{
			{
				ArtifactID:  "art_1",
				Name:        "response",
				Description: "the answer",
				Parts:       []a2a.Part{a2a.TextPart("the answer")},
				Metadata:    map[string]any{"final": true},
				Extensions:  []string{"https://example.com/ext"},
			},
			{
				ArtifactID: "art_2",
				Parts: []a2a.Part{
					{Raw: []byte{0, 1, 2, 255}, MediaType: "application/octet-stream", Filename: "blob.bin"},
					{URL: "https://example.com/report.pdf", MediaType: "application/pdf"},
					{Data: json.RawMessage(`{"k":[1,2,{"x":null}]}`), Metadata: map[string]any{"schema": "v1"}},
				},
			},
		},
		History: []a2a.Message{
			{
				MessageID:        "msg_question",
				Role:             a2a.RoleUser,
				Parts:            []a2a.Part{a2a.TextPart("line one\nline two, ünïcode ✓")},
				ContextID:        ctxID,
				TaskID:           id,
				Metadata:         map[string]any{ids.Meta: map[string]any{"caller": "alpha", "origin": "peer"}},
				Extensions:       []string{"urn:ext"},
				ReferenceTaskIDs: []a2a.TaskID{"tsk_older"},
			},
			answer,
		},
		Metadata: map[string]any{
			"murmur": map[string]any{
				"member":        "beta",
				"trust":         "peer",
				"origin":        "peer",
				"noAnswer":      false,
				"noAnswerBelow": []any{map[string]any{"member": "gamma", "status": "failed"}},
			},
			"empty": []any{},
			"n":     3.5,
		},
	}
}

func TestStoreCreateGet(t *testing.T) {
	tests := []struct {
		name string
		task *a2a.Task
	}{
		{"every field", fullTask()},
		{"no timestamp", &a2a.Task{ID: "tsk_bare", ContextID: "ctx_bare", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}},
		{"plain", storeTask(1, "ctx_a", a2a.TaskStateWorking)},
	}
	s := openTestStore(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Create(t.Context(), tt.task); err != nil {
				t.Fatalf("Create: %v", err)
			}
			got, err := s.Get(t.Context(), tt.task.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(tt.task, got); diff != "" {
				t.Errorf("Get after Create (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStoreCreateRefuses(t *testing.T) {
	s := openTestStore(t)
	if err := s.Create(t.Context(), storeTask(1, "ctx_a", a2a.TaskStateSubmitted)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	tests := []struct {
		name string
		task *a2a.Task
	}{
		{"duplicate id", storeTask(1, "ctx_b", a2a.TaskStateWorking)},
		{"no id", &a2a.Task{ContextID: "ctx_a", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Create(t.Context(), tt.task); err == nil {
				t.Error("Create succeeded, want an error")
			}
		})
	}
	got, err := s.Get(t.Context(), "tsk_01")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(storeTask(1, "ctx_a", a2a.TaskStateSubmitted), got); diff != "" {
		t.Errorf("a refused Create changed the stored task (-want +got):\n%s", diff)
	}
}

func TestStoreUpdate(t *testing.T) {
	s := openTestStore(t)
	if err := s.Create(t.Context(), storeTask(1, "ctx_a", a2a.TaskStateSubmitted)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	working := storeTask(1, "ctx_a", a2a.TaskStateWorking)
	working.Status.Timestamp = a2a.NewTimestamp(storeEpoch.Add(time.Hour))
	completed := fullTask()
	completed.ID, completed.ContextID = "tsk_01", "ctx_a"

	for _, want := range []*a2a.Task{working, completed} {
		if err := s.Update(t.Context(), want); err != nil {
			t.Fatalf("Update: %v", err)
		}
		got, err := s.Get(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get after Update (-want +got):\n%s", diff)
		}
	}
	page, err := s.list(t.Context(), ListQuery{State: a2a.TaskStateCompleted, PageSize: 10})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if page.Total != 1 {
		t.Errorf("List by the updated state: total %d, want 1 (the indexed columns follow Update)", page.Total)
	}
}

func TestStoreNotFound(t *testing.T) {
	s := openTestStore(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(t.Context(), "tsk_missing"); return err }},
		{"Update", func() error { return s.Update(t.Context(), storeTask(7, "ctx_a", a2a.TaskStateWorking)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("err = %v, want one wrapping a2a.ErrTaskNotFound", err)
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v, want one wrapping ErrNotFound", err)
			}
			var wire *a2a.Error
			if !errors.As(err, &wire) || wire.Metadata["taskId"] == "" {
				t.Errorf("err = %v: the a2a error found first carries no taskId", err)
			}
			if got := a2a.ToJSONRPC(err).Code; got != a2a.CodeTaskNotFound {
				t.Errorf("wire code %d, want %d", got, a2a.CodeTaskNotFound)
			}
		})
	}
}

func taskIDs(tasks []*a2a.Task) []a2a.TaskID {
	taskIDs := []a2a.TaskID{}
	for _, t := range tasks {
		taskIDs = append(taskIDs, t.ID)
	}
	return taskIDs
}

// listFixture stores tasks 1..5, created in that order, and one task with no status timestamp.
func listFixture(t *testing.T) *Store {
	t.Helper()
	s := openTestStore(t)
	for _, task := range []*a2a.Task{
		storeTask(1, "ctx_a", a2a.TaskStateCompleted),
		storeTask(2, "ctx_b", a2a.TaskStateWorking),
		storeTask(3, "ctx_a", a2a.TaskStateWorking),
		storeTask(4, "ctx_a", a2a.TaskStateFailed),
		storeTask(5, "ctx_b", a2a.TaskStateCompleted),
		{ID: "tsk_untimed", ContextID: "ctx_c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}},
	} {
		if err := s.Create(t.Context(), task); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	return s
}

func TestStoreList(t *testing.T) {
	s := listFixture(t)
	tests := []struct {
		name  string
		q     ListQuery
		want  []a2a.TaskID
		total int
	}{
		{"all, newest first", ListQuery{}, []a2a.TaskID{"tsk_untimed", "tsk_05", "tsk_04", "tsk_03", "tsk_02", "tsk_01"}, 6},
		{"context", ListQuery{ContextID: "ctx_a"}, []a2a.TaskID{"tsk_04", "tsk_03", "tsk_01"}, 3},
		{"state", ListQuery{State: a2a.TaskStateCompleted}, []a2a.TaskID{"tsk_05", "tsk_01"}, 2},
		{"context and state", ListQuery{ContextID: "ctx_a", State: a2a.TaskStateWorking}, []a2a.TaskID{"tsk_03"}, 1},
		{"after", ListQuery{After: storeEpoch.Add(3 * time.Second)}, []a2a.TaskID{"tsk_05", "tsk_04"}, 2},
		{"after, between milliseconds", ListQuery{After: storeEpoch.Add(3*time.Second + 500*time.Microsecond)}, []a2a.TaskID{"tsk_05", "tsk_04"}, 2},
		{"after, a millisecond before", ListQuery{After: storeEpoch.Add(3*time.Second - time.Millisecond)}, []a2a.TaskID{"tsk_05", "tsk_04", "tsk_03"}, 3},
		{"after and context", ListQuery{ContextID: "ctx_b", After: storeEpoch.Add(2 * time.Second)}, []a2a.TaskID{"tsk_05"}, 1},
		{"nothing matches", ListQuery{ContextID: "ctx_none"}, []a2a.TaskID{}, 0},
		{"unknown state", ListQuery{State: a2a.TaskStateRejected}, []a2a.TaskID{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.PageSize = a2a.MaxPageSize
			page, err := s.list(t.Context(), tt.q)
			if err != nil {
				t.Fatalf("List: %v", err)
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
		page, err := s.list(t.Context(), ListQuery{ContextID: "ctx_b", PageSize: 10})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		want := []*a2a.Task{storeTask(5, "ctx_b", a2a.TaskStateCompleted), storeTask(2, "ctx_b", a2a.TaskStateWorking)}
		if diff := cmp.Diff(want, page.Tasks); diff != "" {
			t.Errorf("tasks (-want +got):\n%s", diff)
		}
	})
}

func TestStoreListPages(t *testing.T) {
	s := openTestStore(t)
	for n := 1; n <= 5; n++ {
		if err := s.Create(t.Context(), storeTask(n, "ctx_a", a2a.TaskStateCompleted)); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	tests := []struct {
		name string
		q    ListQuery
	}{
		{"no filter", ListQuery{PageSize: 2}},
		{"filtered", ListQuery{ContextID: "ctx_a", State: a2a.TaskStateCompleted, After: storeEpoch, PageSize: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pages [][]a2a.TaskID
			q := tt.q
			for {
				page, err := s.list(t.Context(), q)
				if err != nil {
					t.Fatalf("List page %d: %v", len(pages)+1, err)
				}
				if page.Total != 5 {
					t.Errorf("page %d: Total = %d, want 5", len(pages)+1, page.Total)
				}
				pages = append(pages, taskIDs(page.Tasks))
				if page.NextPageToken == "" {
					break
				}
				if len(pages) > 5 {
					t.Fatal("more pages than tasks")
				}
				q.PageToken = page.NextPageToken
			}
			want := [][]a2a.TaskID{{"tsk_05", "tsk_04"}, {"tsk_03", "tsk_02"}, {"tsk_01"}}
			if diff := cmp.Diff(want, pages); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("exact fit has no empty last page", func(t *testing.T) {
		page, err := s.list(t.Context(), ListQuery{PageSize: 5})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(page.Tasks) != 5 || page.NextPageToken != "" {
			t.Errorf("got %d tasks and token %q, want 5 and none", len(page.Tasks), page.NextPageToken)
		}
	})

	t.Run("new tasks do not shift later pages", func(t *testing.T) {
		first, err := s.list(t.Context(), ListQuery{PageSize: 2})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if err := s.Create(t.Context(), storeTask(6, "ctx_a", a2a.TaskStateCompleted)); err != nil {
			t.Fatalf("Create: %v", err)
		}
		second, err := s.list(t.Context(), ListQuery{PageSize: 2, PageToken: first.NextPageToken})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if diff := cmp.Diff([]a2a.TaskID{"tsk_03", "tsk_02"}, taskIDs(second.Tasks)); diff != "" {
			t.Errorf("second page (-want +got):\n%s", diff)
		}
		if second.Total != 6 {
			t.Errorf("Total = %d, want 6", second.Total)
		}
	})
}

func TestStoreListRefusesToken(t *testing.T) {
	s := listFixture(t)
	first, err := s.list(t.Context(), ListQuery{ContextID: "ctx_a", PageSize: 1})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if first.NextPageToken == "" {
		t.Fatal("no next page token")
	}
	token := first.NextPageToken
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	badVersion := append([]byte{9}, raw[1:]...)
	zeroSeq := append(append([]byte{raw[0]}, make([]byte, 8)...), raw[9:]...)

	tests := []struct {
		name string
		q    ListQuery
	}{
		{"garbage", ListQuery{ContextID: "ctx_a", PageToken: "not a token!"}},
		{"base64 of the wrong length", ListQuery{ContextID: "ctx_a", PageToken: base64.RawURLEncoding.EncodeToString([]byte("short"))}},
		{"padded base64", ListQuery{ContextID: "ctx_a", PageToken: base64.URLEncoding.EncodeToString(raw)}},
		{"unknown version", ListQuery{ContextID: "ctx_a", PageToken: base64.RawURLEncoding.EncodeToString(badVersion)}},
		{"zero cursor", ListQuery{ContextID: "ctx_a", PageToken: base64.RawURLEncoding.EncodeToString(zeroSeq)}},
		{"other context", ListQuery{ContextID: "ctx_b", PageToken: token}},
		{"no context", ListQuery{PageToken: token}},
		{"added state", ListQuery{ContextID: "ctx_a", State: a2a.TaskStateWorking, PageToken: token}},
		{"added after", ListQuery{ContextID: "ctx_a", After: storeEpoch, PageToken: token}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.PageSize = 1
			_, err := s.list(t.Context(), tt.q)
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("err = %v, want one wrapping a2a.ErrInvalidParams", err)
			}
			var wire *a2a.Error
			if !errors.As(err, &wire) || len(wire.Violations) != 1 || wire.Violations[0].Field != "pageToken" {
				t.Errorf("err = %v, want a field violation of pageToken", err)
			}
		})
	}

	t.Run("same filter, other page size", func(t *testing.T) {
		page, err := s.list(t.Context(), ListQuery{ContextID: "ctx_a", PageSize: 10, PageToken: token})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if diff := cmp.Diff([]a2a.TaskID{"tsk_03", "tsk_01"}, taskIDs(page.Tasks)); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
	})
}

func storedJSON(t *testing.T, s *Store, id a2a.TaskID) string {
	t.Helper()
	var body string
	if err := s.read.QueryRowContext(t.Context(), `SELECT task FROM tasks WHERE id = ?`, string(id)).Scan(&body); err != nil {
		t.Fatalf("reading %s: %v", id, err)
	}
	return body
}

func TestStoreRecover(t *testing.T) {
	s := openTestStore(t)
	states := []a2a.TaskState{
		a2a.TaskStateCompleted, a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateSubmitted,
		a2a.TaskStateCanceled, a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateAuthRequired,
	}
	// Ids in the reverse of creation order, so the returned order is seen to be the store's.
	var tasks []*a2a.Task
	for i, state := range states {
		task := storeTask(len(states)-i, "ctx_a", state)
		if err := s.Create(t.Context(), task); err != nil {
			t.Fatalf("Create: %v", err)
		}
		tasks = append(tasks, task)
	}
	before := map[a2a.TaskID]string{}
	for _, task := range tasks {
		before[task.ID] = storedJSON(t, s, task.ID)
	}

	now := storeEpoch.Add(time.Hour + 1500*time.Microsecond)
	recovered, err := s.Recover(t.Context(), now)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	var wantIDs []a2a.TaskID
	for _, task := range tasks {
		if !task.Status.State.Terminal() {
			wantIDs = append(wantIDs, task.ID)
		}
	}
	if diff := cmp.Diff(wantIDs, recovered); diff != "" {
		t.Errorf("Recover ids (-want +got):\n%s", diff)
	}

	for _, task := range tasks {
		if task.Status.State.Terminal() {
			if got := storedJSON(t, s, task.ID); got != before[task.ID] {
				t.Errorf("terminal task %s changed:\nbefore %s\nafter  %s", task.ID, before[task.ID], got)
			}
			continue
		}
		got, err := s.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		msg := got.Status.Message
		if msg == nil {
			t.Fatalf("task %s: no status message", task.ID)
		}
		id, ok := strings.CutPrefix(string(msg.MessageID), "msg_")
		if _, err := ulid.ParseStrict(id); !ok || err != nil || id != strings.ToLower(id) {
			t.Errorf("task %s: message id %q is not msg_ and a lowercase ULID", task.ID, msg.MessageID)
		}
		want := task
		want.Status = a2a.TaskStatus{
			State: a2a.TaskStateFailed,
			Message: &a2a.Message{
				MessageID: msg.MessageID,
				Role:      a2a.RoleAgent,
				Parts:     []a2a.Part{a2a.TextPart(RestartMessage)},
				TaskID:    task.ID,
				ContextID: task.ContextID,
			},
			Timestamp: a2a.NewTimestamp(now),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("recovered task (-want +got):\n%s", diff)
		}
	}

	page, err := s.list(t.Context(), ListQuery{State: a2a.TaskStateFailed, After: now.Add(-time.Millisecond), PageSize: 10})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if page.Total != len(wantIDs) {
		t.Errorf("List of the recovered: total %d, want %d (the indexed columns follow Recover)", page.Total, len(wantIDs))
	}

	again, err := s.Recover(t.Context(), now.Add(time.Minute))
	if err != nil {
		t.Fatalf("second Recover: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("second Recover changed %v, want nothing", again)
	}
}

func TestStoreDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "alpha")
	path := filepath.Join(dir, "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	want := fullTask()
	if err := s.Create(t.Context(), want); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Mode() != 0o600 {
		t.Errorf("write-ahead log: %v, %v; want mode 0600", fi, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded")
	}

	for name, wantMode := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != wantMode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), wantMode)
		}
	}

	s, err = Open(path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	got, err := s.Get(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("Get after reopening: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("task after reopening (-want +got):\n%s", diff)
	}
	var version int
	if err := s.read.QueryRowContext(t.Context(), `PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(schema) {
		t.Errorf("user_version = %d, want %d", version, len(schema))
	}
}

func TestStoreRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.write.ExecContext(t.Context(), fmt.Sprintf(`PRAGMA user_version = %d`, len(schema)+1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
}

func TestStorePragmas(t *testing.T) {
	s := openTestStore(t)
	pools := []struct {
		name  string
		db    *sql.DB
		conns int
	}{
		{"write", s.write, 1},
		{"read", s.read, 3},
	}
	want := map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "5000", "foreign_keys": "1",
		"temp_store": "2", "cache_size": "-32768"}
	for _, pool := range pools {
		t.Run(pool.name, func(t *testing.T) {
			// Hold several connections at once, so each pragma is seen on distinct pooled connections.
			var conns []*sql.Conn
			for range pool.conns {
				c, err := pool.db.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns = append(conns, c)
			}
			for i, c := range conns {
				got := map[string]string{}
				for name := range want {
					var v string
					if err := c.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
						t.Fatalf("PRAGMA %s: %v", name, err)
					}
					got[name] = v
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("connection %d pragmas (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestStoreConcurrentCreate(t *testing.T) {
	s := openTestStore(t)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Create(t.Context(), storeTask(i+1, "ctx_a", a2a.TaskStateSubmitted))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %d: %v", i+1, err)
		}
	}
	page, err := s.list(t.Context(), ListQuery{PageSize: a2a.MaxPageSize})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if page.Total != n || len(page.Tasks) != n {
		t.Errorf("stored %d tasks (listed %d), want %d", page.Total, len(page.Tasks), n)
	}
}

func BenchmarkStoreGet(b *testing.B) {
	s := openTestStore(b)
	task := fullTask()
	if err := s.Create(b.Context(), task); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), task.ID); err != nil {
			b.Fatal(err)
		}
	}
}
