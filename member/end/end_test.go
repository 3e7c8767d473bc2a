package end_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/end"
	"github.com/murmur-run/murmur/member/records"
)

var at = time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)

func TestRecords(t *testing.T) {
	tests := []struct {
		name     string
		e        end.End
		noAnswer bool
		want     []records.Record
		exit     string
		result   string // "" for none
	}{{
		name: "completed",
		e:    end.End{State: a2a.TaskStateCompleted, Text: "42", Answer: &end.Answer{Text: "42"}},
		want: []records.Record{{Type: "task_end", Task: "t1", Fields: map[string]any{"state": "TASK_STATE_COMPLETED", "exit_status": "completed"}}},
		exit: "completed", result: "42",
	}, {
		name: "failed, with a command running",
		e:    end.End{State: a2a.TaskStateFailed, Text: "boom", Running: []string{"wrk_1"}},
		want: []records.Record{
			{Type: "task_failed", Task: "t1", Fields: map[string]any{"reason": "boom"}},
			{Type: "task_end", Task: "t1", Fields: map[string]any{"state": "TASK_STATE_FAILED", "exit_status": "failed", "runningCommands": []string{"wrk_1"}}},
		},
		exit: "failed",
	}, {
		name: "failed without an answer", e: end.End{State: a2a.TaskStateFailed, Text: "no peer answered"}, noAnswer: true,
		want:   []records.Record{{Type: "task_end", Task: "t1", Fields: map[string]any{"state": "TASK_STATE_FAILED", "exit_status": "no_answer", "reason": "no peer answered"}}},
		result: "no answer: no peer answered",
	}, {
		name: "canceled", e: end.End{State: a2a.TaskStateCanceled, Text: "canceled"},
		want: []records.Record{{Type: "task_end", Task: "t1", Fields: map[string]any{"state": "TASK_STATE_CANCELED", "exit_status": "canceled"}}},
		exit: "canceled",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.e.Records(nil, "t1", tt.noAnswer)); diff != "" {
				t.Errorf("Records (-want +got):\n%s", diff)
			}
			if got := tt.e.Exit(tt.noAnswer); got != tt.exit {
				t.Errorf("Exit = %q, want %q", got, tt.exit)
			}
			if got, ok := tt.e.Result(tt.noAnswer); got != tt.result || ok != (tt.result != "") {
				t.Errorf("Result = %q %v, want %q", got, ok, tt.result)
			}
		})
	}
}

func TestApply(t *testing.T) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Metadata: map[string]any{ids.Meta: map[string]any{}}}
	e := end.End{State: a2a.TaskStateCompleted, Text: `{"n":1}`, Answer: &end.Answer{Text: `{"n":1}`, Data: json.RawMessage(`{"n":1}`)}, Running: []string{"wrk_1"}, At: at}
	e.Apply(task)
	if task.Status.State != a2a.TaskStateCompleted || task.Status.Message == nil || task.Status.Message.Role != a2a.RoleAgent {
		t.Fatalf("status %+v", task.Status)
	}
	var names []string
	for _, a := range task.Artifacts {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff([]string{"data", "response"}, names); diff != "" {
		t.Errorf("artifacts (-want +got):\n%s", diff)
	}
	if len(task.History) != 1 || task.History[0].MessageID != task.Status.Message.MessageID {
		t.Errorf("history %+v, want the status message", task.History)
	}
	if got := ids.Get(ids.Murmur(task.Metadata), ids.MetaRunningCommands); !cmp.Equal(got, []string{"wrk_1"}) {
		t.Errorf("runningCommands %v", got)
	}
	if end.NoAnswer(task) {
		t.Error("NoAnswer of an answered task")
	}
}

func TestStatusWithoutText(t *testing.T) {
	st := end.Status(&a2a.Task{ID: "t1"}, a2a.TaskStateWorking, "", at)
	if st.Message != nil || st.State != a2a.TaskStateWorking {
		t.Errorf("status %+v, want working without a message", st)
	}
}
