package end_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/end"
)

// unanswered is an end without an answer, as attempt.NoAnswerError is one.
type unanswered struct{}

func (unanswered) Error() string    { return "no luck" }
func (unanswered) Mark(t *a2a.Task) { ids.Set(ids.Murmur(t.Metadata), ids.MetaNoAnswer, true) }

// What stopped a run decides its end before what the run returned.
func TestRunDecide(t *testing.T) {
	boom := errors.New("boom")
	timeout := &converse.InputTimeout{Limit: 2 * time.Second}
	tests := []struct {
		name   string
		run    end.Run
		state  a2a.TaskState
		text   string
		answer bool
		meta   ids.MetaKey // marked in the task; "" for none
	}{
		{"canceled", end.Run{Canceled: true, Err: boom, Cause: end.ErrDeadline}, a2a.TaskStateCanceled, end.CanceledText, false, ""},
		{"canceled, calls left", end.Run{Canceled: true, CallsLeft: 2}, a2a.TaskStateCanceled, fmt.Sprintf(end.CanceledCallsRunningText, 2), false, ""},
		{"its question timed out", end.Run{Cause: fmt.Errorf("wrapped: %w", timeout), Shutdown: true}, a2a.TaskStateFailed, timeout.Error(), false, ""},
		{"the deadline", end.Run{Cause: end.ErrDeadline, Deadline: at, Shutdown: true}, a2a.TaskStateFailed, fmt.Sprintf(end.DeadlineText, "2026-10-20T12:00:00Z"), false, ""},
		{"a shutdown", end.Run{Shutdown: true, Err: boom}, a2a.TaskStateCanceled, end.ShutdownText, false, ""},
		{"no answer", end.Run{Err: fmt.Errorf("attempt: %w", unanswered{})}, a2a.TaskStateFailed, "no luck", false, ids.MetaNoAnswer},
		{"a failure", end.Run{Err: boom}, a2a.TaskStateFailed, "boom", false, ""},
		{"an answer", end.Run{Answer: "42"}, a2a.TaskStateCompleted, "42", true, ""},
		{"an answer in one turn", end.Run{Answer: "42", OneTurn: true}, a2a.TaskStateCompleted, "42", true, ids.MetaOneTurn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := &a2a.Task{ID: "tsk_1", Metadata: map[string]any{ids.Meta: map[string]any{}}}
			state, text, answer := tc.run.Decide(task)
			if state != tc.state || text != tc.text || (answer != nil) != tc.answer {
				t.Errorf("Decide = %s %q %v; want %s %q, answer %v", state, text, answer, tc.state, tc.text, tc.answer)
			}
			if answer != nil && answer.Text != tc.run.Answer {
				t.Errorf("answer %q; want %q", answer.Text, tc.run.Answer)
			}
			meta := ids.Murmur(task.Metadata)
			for _, key := range []ids.MetaKey{ids.MetaNoAnswer, ids.MetaOneTurn} {
				if got := ids.Get(meta, key) == true; got != (key == tc.meta) {
					t.Errorf("metadata.murmur.%s = %v", key, ids.Get(meta, key))
				}
			}
		})
	}
}
