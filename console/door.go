package console

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// The reads the pages make from members' doors. Each is bounded by the context it is given; a door that
// does not answer leaves its part of the page empty, with the reason where the page has room for one.

// fromDoor fills what a task's own door says of it: its state, its messages, its answer, what it asks
// when it waits, its usage and its trace.
func (c *Console) fromDoor(ctx context.Context, m *memberWatch, v *TaskView) {
	task, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(v.ID)})
	if err != nil {
		var ae *a2a.Error
		if errors.As(err, &ae) && ae.Code == a2a.CodeTaskNotFound {
			v.Unknown = true
		}
		v.DoorErr = describeDoorError(err)
		return
	}
	v.Task = task
	v.State = task.Status.State
	v.ContextID = task.ContextID
	if task.Status.Message != nil {
		v.StatusMsg = task.Status.Message.Text()
	}
	v.Message = firstUserText(task)
	if a, ok := task.Artifact("response"); ok {
		v.Answer, v.HasAnswer = a.Text(), true
	}
	if mm, ok := task.Metadata["murmur"].(map[string]any); ok {
		if caller, _ := mm["caller"].(string); caller != "" {
			v.Caller = caller
		}
	}
	v.Waiting = v.State.Interrupted()
	if v.State == a2a.TaskStateInputRequired && task.Status.Message != nil {
		v.Question, v.Tool, v.ToolInput = questionOf(task.Status.Message)
	}
	v.Ended = v.State.Terminal()
	if !v.Ended {
		v.Replica, v.Replicated = m.replicaOf(v.ID)
	}
	v.Usage, v.TraceID = usageOf(task), traceIDOf(task)
	v.TraceURL = c.traceLink(v.TraceID)
}

// firstUserText is the text of a task's first user message: what it was asked.
func firstUserText(t *a2a.Task) string {
	for _, h := range t.History {
		if h.Role == a2a.RoleUser {
			return h.Text()
		}
	}
	return ""
}

// questionOf reads what a waiting task asks from its status message's data part (DESIGN §15); without
// one, the message's text is the question.
func questionOf(m *a2a.Message) (question, tool, input string) {
	for _, p := range m.Parts {
		var d struct {
			Question string          `json:"question"`
			Tool     string          `json:"tool"`
			Input    json.RawMessage `json:"input"`
		}
		if p.Data != nil && json.Unmarshal(p.Data, &d) == nil && d.Question != "" {
			return d.Question, d.Tool, string(d.Input)
		}
	}
	return m.Text(), "", ""
}

// doorWithTask asks each member's door, in roster order, for a task, and returns the first member whose
// door has it, or "". The doors get five seconds together.
func (c *Console) doorWithTask(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	zero := 0
	for _, m := range c.members {
		if _, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id), HistoryLength: &zero}); err == nil {
			return m.Name
		}
	}
	return ""
}

// sentTexts reads, from each callee's door, the message a member call sent: the callee task's first user
// message. A call whose callee task is unknown, or whose door does not answer, keeps SentText "".
func (c *Console) sentTexts(ctx context.Context, calls map[string]*CallView) {
	for _, cv := range calls {
		if cv.ToTask == "" {
			continue
		}
		m := c.byName[cv.To]
		if m == nil {
			continue
		}
		if t, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(cv.ToTask)}); err == nil {
			cv.SentText = firstUserText(t)
		}
	}
}
