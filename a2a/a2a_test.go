package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTaskMarshalsAsA2A10(t *testing.T) {
	ts := NewTimestamp(time.Date(2026, 12, 2, 10, 30, 0, 123456789, time.UTC))
	task := Task{
		ID: "tsk_1", ContextID: "ctx_1",
		Status:    TaskStatus{State: TaskStateCanceled, Timestamp: ts},
		Artifacts: []Artifact{{ArtifactID: "art_1", Name: "response", Parts: []Part{TextPart("hi")}}},
		History:   []Message{{MessageID: "m1", Role: RoleUser, Parts: []Part{TextPart("")}}},
	}
	got, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"tsk_1","contextId":"ctx_1","status":{"state":"TASK_STATE_CANCELED","timestamp":"2026-12-02T10:30:00.123Z"},` +
		`"artifacts":[{"artifactId":"art_1","name":"response","parts":[{"text":"hi"}]}],` +
		`"history":[{"messageId":"m1","role":"ROLE_USER","parts":[{"text":""}]}]}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("Task JSON (-want +got):\n%s", diff)
	}
	var back Task
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status.Timestamp.UnixMilli() != ts.UnixMilli() || back.History[0].Parts[0].Text == nil {
		t.Errorf("round trip lost data: %+v", back)
	}
}

func TestErrorCarriesErrorInfo(t *testing.T) {
	err := fmt.Errorf("store: %w", ErrTaskNotFound.WithMeta("taskId", "tsk_x"))
	je := ToJSONRPC(err)
	if je.Code != -32001 || je.Message != "Task not found" {
		t.Fatalf("ToJSONRPC = %d %q", je.Code, je.Message)
	}
	want := `[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"tsk_x"}}]`
	if diff := cmp.Diff(want, string(*je.Data)); diff != "" {
		t.Errorf("error data (-want +got):\n%s", diff)
	}
	back := FromJSONRPC(je)
	if !errors.Is(back, ErrTaskNotFound) || back.Reason != "TASK_NOT_FOUND" || back.Metadata["taskId"] != "tsk_x" {
		t.Errorf("FromJSONRPC = %+v", back)
	}
}

func TestInvalidParamsCarriesFieldViolations(t *testing.T) {
	je := ToJSONRPC(InvalidParams(FieldViolation{Field: "id", Description: "required"}))
	if je.Code != CodeInvalidParams {
		t.Fatalf("code %d", je.Code)
	}
	back := FromJSONRPC(je)
	if diff := cmp.Diff([]FieldViolation{{Field: "id", Description: "required"}}, back.Violations); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

func TestUnknownErrorsRevealNothing(t *testing.T) {
	je := ToJSONRPC(errors.New("open /secret/path: permission denied"))
	if je.Code != CodeInternalError || je.Message != "Internal error" || je.Data != nil {
		t.Errorf("ToJSONRPC(plain error) = %+v, want a bare internal error", je)
	}
}

func TestStates(t *testing.T) {
	for s, want := range map[TaskState]bool{TaskStateCompleted: true, TaskStateFailed: true, TaskStateCanceled: true,
		TaskStateRejected: true, TaskStateWorking: false, TaskStateSubmitted: false, TaskStateInputRequired: false} {
		if s.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", s, !want)
		}
	}
	if TaskState("working").Valid() {
		t.Error("the 0.3 spelling is valid")
	}
	if !IsLegacyMethod("message/send") || IsLegacyMethod("SendMessage") {
		t.Error("IsLegacyMethod")
	}
}
