package push

import (
	"encoding/json"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// statusKey tells one stored status from another: its state, its time and its message's id.
func statusKey(s a2a.TaskStatus) string {
	k := string(s.State) + " "
	if s.Timestamp != nil {
		b, _ := s.Timestamp.MarshalJSON()
		k += strings.Trim(string(b), `"`)
	}
	k += " "
	if s.Message != nil {
		k += string(s.Message.MessageID)
	}
	return k
}

// sqlStatusKey is statusKey of a stored task's JSON, in SQL.
const sqlStatusKey = `json_extract(t.task, '$.status.state') || ' ' || coalesce(json_extract(t.task, '$.status.timestamp'), '') || ' ' || coalesce(json_extract(t.task, '$.status.message.messageId'), '')`

// keyState is the task state of a status key.
func keyState(key string) a2a.TaskState {
	s, _, _ := strings.Cut(key, " ")
	return a2a.TaskState(s)
}

// PostBody is what a webhook is posted for t: {"task": …} without its history.
func PostBody(t *a2a.Task) ([]byte, error) {
	cp := *t
	cp.History = nil
	return json.Marshal(a2a.StreamResponse{Task: &cp})
}
