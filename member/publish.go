package member

import (
	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/driver"
)

// Publisher is told of every change of a task the session has stored, and of the agent loop's
// transient progress (a tool call started or ended). member/events' Hub is one: the door streams what
// it publishes, the push notifier delivers what it observes. Both methods must return without waiting
// for any reader; they are called with the session's lock held.
type Publisher interface {
	Publish(t *a2a.Task)
	Progress(id a2a.TaskID, text string, meta map[string]any)
}

// publish reports a stored change of t, when the session has a publisher.
func (s *Session) publish(t *a2a.Task) {
	if s.cfg.Events != nil {
		s.cfg.Events.Publish(t)
	}
}

// toolProgress shows a tool call of the running task on its stream: "tool <name>: running" before the
// call, "tool <name>: <status>" after it.
func (s *Session) toolProgress(task string, call driver.ToolCall, status string) {
	if s.cfg.Events == nil {
		return
	}
	s.cfg.Events.Progress(a2a.TaskID(task), "tool "+call.Name+": "+status,
		map[string]any{"murmur": map[string]any{"progress": "tool_call", "tool": call.Name, "call_id": call.ID, "status": status}})
}
