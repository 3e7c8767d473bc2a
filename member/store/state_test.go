package store

import (
	"encoding/json"
	"testing"

	"github.com/murmur-run/murmur/a2a"
)

// StateOf reads a stored task's state wherever its status stands among its keys, and refuses what is
// not a task.
func TestStateOf(t *testing.T) {
	task := &a2a.Task{ID: "tsk_1", ContextID: "ctx_1", Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired},
		History: []a2a.Message{{MessageID: "m1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(`"status":{"state":"TASK_STATE_FAILED"}`)}}}}
	body, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := StateOf(task.ID, body); err != nil || got != a2a.TaskStateInputRequired {
		t.Errorf("StateOf(stored task) = %q, %v; want %q", got, err, a2a.TaskStateInputRequired)
	}
	late := []byte(`{"history":[{"parts":[{"text":"x"}]}],"id":"tsk_1","status":{"message":{"parts":[]},"state":"TASK_STATE_COMPLETED"}}`)
	if got, err := StateOf("tsk_1", late); err != nil || got != a2a.TaskStateCompleted {
		t.Errorf("StateOf(status last) = %q, %v; want %q", got, err, a2a.TaskStateCompleted)
	}
	for _, bad := range []string{``, `[]`, `{"id":"tsk_1"}`, `{"id":`} {
		if got, err := StateOf("tsk_1", []byte(bad)); err == nil {
			t.Errorf("StateOf(%q) = %q, want an error", bad, got)
		}
	}
}
