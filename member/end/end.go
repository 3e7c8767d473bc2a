package end

import (
	"encoding/json"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/records"
)

// Answer is a task's answer: its text, and for a data answer the JSON value the text spells.
type Answer struct {
	Text string
	Data json.RawMessage
}

// End is how a task ended, or many tasks ended at once: built once, when they end, and carried whole
// from their status to their records.
type End struct {
	State   a2a.TaskState
	Text    string    // the status message: the answer, or why the task ended otherwise; "" for none
	Answer  *Answer   // a completed task's answer; nil for any other end
	Running []string  // the background commands running when it ended; nil when none
	At      time.Time // when it ended: the status's timestamp, the end of mur_task_duration_seconds
}

// Status is t's status in state at now; a non-empty text becomes its message, from the agent.
func Status(t *a2a.Task, state a2a.TaskState, text string, now time.Time) a2a.TaskStatus {
	st := a2a.TaskStatus{State: state, Timestamp: a2a.NewTimestamp(now)}
	if text != "" {
		st.Message = &a2a.Message{
			MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
			Role:      a2a.RoleAgent,
			Parts:     []a2a.Part{a2a.TextPart(text)},
			TaskID:    t.ID,
			ContextID: t.ContextID,
		}
	}
	return st
}

// Apply writes e into t before t is stored: its status; with an answer, the response artifact, a data
// answer's data artifact before it (the status message then a data part), and the status message as the
// history's last; the running commands in metadata.murmur.
func (e End) Apply(t *a2a.Task) {
	t.Status = Status(t, e.State, e.Text, e.At)
	if e.Answer != nil {
		t.Artifacts = append(t.Artifacts, a2a.Artifact{
			ArtifactID: ids.New("art_"),
			Name:       "response",
			Parts:      []a2a.Part{a2a.TextPart(e.Answer.Text)},
		})
		if e.Answer.Data != nil {
			converse.AnswerData(t, e.Answer.Data)
		}
		t.History = append(t.History, *t.Status.Message)
	}
	if len(e.Running) > 0 {
		ids.Set(ids.Murmur(t.Metadata), ids.MetaRunningCommands, e.Running)
	}
}

// NoAnswer reports whether t ended without an answer (metadata.murmur.noAnswer): its end writes no
// task_failed and never decides session_end's exit_status (SPEC).
func NoAnswer(t *a2a.Task) bool { return ids.Get(ids.Murmur(t.Metadata), ids.MetaNoAnswer) == true }

// Records appends to recs the records the stored end of task id leaves, one record type per question:
// task_failed (why: its reason) for a task that failed, then task_end (how: its state, exit_status and
// the running commands). A task that ended without an answer writes no task_failed; its reason rides its
// task_end, whose exit_status is no_answer.
func (e End) Records(recs []records.Record, id a2a.TaskID, noAnswer bool) []records.Record {
	fields := map[string]any{"state": string(e.State), "exit_status": string(calls.StateWord(e.State))}
	if e.Running != nil {
		fields["runningCommands"] = e.Running
	}
	switch {
	case noAnswer:
		fields["exit_status"] = "no_answer"
		fields["reason"] = e.Text
	case e.State == a2a.TaskStateFailed:
		recs = append(recs, records.Record{Type: records.TypeTaskFailed, Task: string(id), Fields: map[string]any{"reason": e.Text}})
	}
	return append(recs, records.Record{Type: records.TypeTaskEnd, Task: string(id), Fields: fields})
}

// Exit is the exit_status the end gives session_end: its state's word, "" for a task that ended without
// an answer, which decides none.
func (e End) Exit(noAnswer bool) string {
	if noAnswer {
		return ""
	}
	return string(calls.StateWord(e.State))
}

// Result is what the end writes to out/result.txt: the answer, "no answer: " and the reason, or nothing
// (ok false).
func (e End) Result(noAnswer bool) (text string, ok bool) {
	switch {
	case e.Answer != nil:
		return e.Answer.Text, true
	case noAnswer:
		return "no answer: " + e.Text, true
	}
	return "", false
}
