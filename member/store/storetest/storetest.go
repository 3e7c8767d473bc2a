// Package storetest is the behavioural suite of a member's task store: Run checks, through the
// store.Tasks interface alone, the guarantees its doc comment lists and the behaviour the SQLite store's
// own tests check, against any implementation (the embedded SQLite store, PostgreSQL).
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/store"
)

// opener returns a fresh, empty store for one subtest; it registers the store's Close (and whatever
// else the store needs removed) with t.Cleanup.
type opener = func(t *testing.T) store.Tasks

// Run runs the suite: every subtest opens a fresh store through open.
func Run(t *testing.T, open func(t *testing.T) store.Tasks) {
	for _, st := range []struct {
		name string
		run  func(t *testing.T, open opener)
	}{
		{"CreateGet", testCreateGet},
		{"CreateRefuses", testCreateRefuses},
		{"Update", testUpdate},
		{"UpdateAll", testUpdateAll},
		{"NotFound", testNotFound},
		{"GetInScope", testGetInScope},
		{"GetAll", testGetAll},
		{"GetByMessage", testGetByMessage},
		{"List", testList},
		{"ListScope", testListScope},
		{"Pages", testPages},
		{"PageTokens", testPageTokens},
		{"Recover", testRecover},
		{"EndAll", testEndAll},
		{"Order", testOrder},
		{"CreateLater", testCreateLater},
		{"CreateBatched", testCreateBatched},
		{"ConcurrentCreate", testConcurrentCreate},
		{"Ping", testPing},
	} {
		t.Run(st.name, func(t *testing.T) { st.run(t, open) })
	}
}

// epoch is the time the suite's tasks are stamped from.
var epoch = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

// task returns task number n (id tsk_NN), whose status timestamp is n seconds after epoch.
func task(n int, contextID string, state a2a.TaskState) *a2a.Task {
	id := taskID(n)
	return &a2a.Task{
		ID:        id,
		ContextID: contextID,
		Status: a2a.TaskStatus{
			State:     state,
			Timestamp: a2a.NewTimestamp(epoch.Add(time.Duration(n) * time.Second)),
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

func taskID(n int) a2a.TaskID { return a2a.TaskID(fmt.Sprintf("tsk_%02d", n)) }

// stepTask is task n in state with metadata step, so that each of its writes can be told apart.
func stepTask(n int, state a2a.TaskState, step int) *a2a.Task {
	t := task(n, "ctx", state)
	t.Metadata = map[string]any{"step": float64(step)}
	return t
}

// fullTask sets every field a task can carry, with text that JSON escapes, so a round trip shows what
// the store keeps.
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
			Timestamp: a2a.NewTimestamp(epoch.Add(1234567 * time.Microsecond)),
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
				Parts:            []a2a.Part{a2a.TextPart("line one\nline two, ünïcode ✓ <b>&amp; \"quoted\" \\ slash \u2028")},
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
			"big":   12345678901234567890.0,
		},
	}
}

// peerTask is task n, completed in context "ctx", sent by caller ("" for the operator's).
func peerTask(n int, caller string) *a2a.Task {
	t := task(n, "ctx", a2a.TaskStateCompleted)
	meta := map[string]any{"member": "solo", "origin": "operator", "trust": "trusted"}
	if caller != "" {
		meta["origin"], meta[string(ids.MetaCaller)], meta["trust"] = "peer", caller, "untrusted"
	}
	t.Metadata = map[string]any{ids.Meta: meta}
	return t
}

func taskIDs(tasks []*a2a.Task) []a2a.TaskID {
	out := []a2a.TaskID{}
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

// clone is a deep copy of task, through its JSON.
func clone(t *testing.T, task *a2a.Task) *a2a.Task {
	t.Helper()
	body, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Decode(task.ID, body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustMarshal(t *testing.T, task *a2a.Task) string {
	t.Helper()
	body, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func create(t *testing.T, s store.Tasks, tasks ...*a2a.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.Create(t.Context(), task); err != nil {
			t.Fatalf("Create %s: %v", task.ID, err)
		}
	}
}

func get(t *testing.T, s store.Tasks, id a2a.TaskID) *a2a.Task {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return got
}

// checkStored fails unless Get answers want, field for field, and GetInScope (the operator's) answers
// its JSON exactly as a2a.Task marshals it.
func checkStored(t *testing.T, s store.Tasks, want *a2a.Task, when string) {
	t.Helper()
	got, err := s.Get(t.Context(), want.ID)
	if err != nil {
		t.Errorf("%s: Get %s: %v", when, want.ID, err)
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Get %s (-want +got):\n%s", when, want.ID, diff)
	}
	body, err := s.GetInScope(t.Context(), want.ID, store.OperatorScope())
	if err != nil {
		t.Errorf("%s: GetInScope %s: %v", when, want.ID, err)
		return
	}
	if w := mustMarshal(t, want); string(body) != w {
		t.Errorf("%s: GetInScope %s answered\n%s\nwant the task as a2a.Task marshals it\n%s", when, want.ID, body, w)
	}
}

// checkNotFound fails unless err is the store's "not found" of task id: wrapping store.ErrNotFound and
// a2a.ErrTaskNotFound, -32001 on the wire, the a2a error found first carrying the task's id.
func checkNotFound(t *testing.T, what string, err error, id a2a.TaskID) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want the task not found", what)
		return
	}
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: err = %v, want one wrapping store.ErrNotFound", what, err)
	}
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("%s: err = %v, want one wrapping a2a.ErrTaskNotFound", what, err)
	}
	var wire *a2a.Error
	if !errors.As(err, &wire) || wire.Metadata["taskId"] != string(id) {
		t.Errorf("%s: err = %v: the a2a error found first does not carry taskId %s", what, err, id)
	}
	if got := a2a.ToJSONRPC(err).Code; got != a2a.CodeTaskNotFound {
		t.Errorf("%s: wire code %d, want %d", what, got, a2a.CodeTaskNotFound)
	}
}

// checkMessageID fails unless id is a message id as the project makes them: msg_ and a lowercase ULID.
func checkMessageID(t *testing.T, what string, id a2a.MessageID) {
	t.Helper()
	u, ok := strings.CutPrefix(string(id), ids.PrefixMessage)
	if _, err := ulid.ParseStrict(u); !ok || err != nil || u != strings.ToLower(u) {
		t.Errorf("%s: message id %q is not %s and a lowercase ULID", what, id, ids.PrefixMessage)
	}
}

// listAll walks every page of q in sc and returns the ids in order and the total each page reported
// (failing if the pages disagree on it).
func listAll(t *testing.T, s store.Tasks, q store.ListQuery, sc store.Scope) (pages [][]a2a.TaskID, total int) {
	t.Helper()
	for {
		page, err := s.ListInScope(t.Context(), q, sc)
		if err != nil {
			t.Fatalf("ListInScope page %d of %+v: %v", len(pages)+1, q, err)
		}
		if len(pages) == 0 {
			total = page.Total
		} else if page.Total != total {
			t.Errorf("page %d of %+v: Total %d, the first page said %d", len(pages)+1, q, page.Total, total)
		}
		pages = append(pages, taskIDs(page.Tasks))
		if page.NextPageToken == "" {
			return pages, total
		}
		if len(pages) > 1000 {
			t.Fatalf("more than 1000 pages of %+v", q)
		}
		q.PageToken = page.NextPageToken
	}
}

// eventually polls cond every few milliseconds for up to d and reports whether it came true.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
