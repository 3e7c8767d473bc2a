package converse

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/driver"
)

// History is the conversation earlier tasks of a context hand to a new task in it, oldest first: each
// task's message as the user's, then its answer as the assistant's (a task that ended without one says
// how it ended instead). tasks may come in any order; the one named skip (the new task) and tasks that
// have not ended are left out.
func History(tasks []*a2a.Task, skip a2a.TaskID) []driver.ChatMessage {
	ended := make([]*a2a.Task, 0, len(tasks))
	for _, t := range tasks {
		if t.ID != skip && t.Status.State.Terminal() && len(t.History) > 0 {
			ended = append(ended, t)
		}
	}
	slices.SortStableFunc(ended, func(a, b *a2a.Task) int { return stamp(a).Compare(stamp(b)) })
	var out []driver.ChatMessage
	for _, t := range ended {
		out = append(out, driver.ChatMessage{Role: driver.RoleUser, Text: t.History[0].Text()},
			driver.ChatMessage{Role: driver.RoleAssistant, Text: Outcome(t)})
	}
	return out
}

// stamp orders tasks by their first message's place: the status timestamp of a task that ended is
// when it ended, and tasks of one context run one after another.
func stamp(t *a2a.Task) time.Time {
	if t.Status.Timestamp == nil {
		return time.Time{}
	}
	return t.Status.Timestamp.Time
}

// Outcome is how a task of a context is remembered: its answer, or a line saying it ended without one.
func Outcome(t *a2a.Task) string {
	if t.Status.State == a2a.TaskStateCompleted {
		for _, a := range t.Artifacts {
			if a.Name == "response" {
				return partsText(a.Parts)
			}
		}
	}
	why := ""
	if t.Status.Message != nil {
		why = ": " + t.Status.Message.Text()
	}
	return fmt.Sprintf("[runtime] This earlier task of the conversation ended %s without an answer%s", stateWord(t.Status.State), why)
}

func stateWord(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

func partsText(parts []a2a.Part) string {
	m := a2a.Message{Parts: parts}
	return m.Text()
}
