package a2a

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// ProtocolVersion is the A2A version this package speaks on the wire.
const ProtocolVersion = "1.0"

// TaskID names a task; ids are chosen by the server.
type TaskID string

// MessageID names a message; ids are chosen by the sender.
type MessageID string

// Role is who sent a message.
type Role string

// The two roles of A2A 1.0.
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// TaskState is the state of a task, in its ProtoJSON spelling.
type TaskState string

// The task states of A2A 1.0.
const (
	TaskStateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	TaskStateWorking       TaskState = "TASK_STATE_WORKING"
	TaskStateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	TaskStateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
	TaskStateCompleted     TaskState = "TASK_STATE_COMPLETED"
	TaskStateFailed        TaskState = "TASK_STATE_FAILED"
	TaskStateCanceled      TaskState = "TASK_STATE_CANCELED"
	TaskStateRejected      TaskState = "TASK_STATE_REJECTED"
)

// Terminal reports whether no further change can happen to a task in state s.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskStateCompleted, TaskStateFailed, TaskStateCanceled, TaskStateRejected:
		return true
	}
	return false
}

// Interrupted reports whether a task in state s waits for its client.
func (s TaskState) Interrupted() bool {
	return s == TaskStateInputRequired || s == TaskStateAuthRequired
}

// Valid reports whether s is one of the states of A2A 1.0.
func (s TaskState) Valid() bool {
	switch s {
	case TaskStateSubmitted, TaskStateWorking, TaskStateInputRequired, TaskStateAuthRequired,
		TaskStateCompleted, TaskStateFailed, TaskStateCanceled, TaskStateRejected:
		return true
	}
	return false
}

// Part is one piece of a message or artifact: exactly one of Text, Raw, URL and Data is set.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       []byte          `json:"raw,omitempty"` // base64 on the wire
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

// TextPart returns a part holding text.
func TextPart(text string) Part { return Part{Text: &text} }

// Message is one message between a client and an agent.
type Message struct {
	MessageID        MessageID      `json:"messageId"`
	Role             Role           `json:"role"`
	Parts            []Part         `json:"parts"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           TaskID         `json:"taskId,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []TaskID       `json:"referenceTaskIds,omitempty"`
}

// Text returns the message's text parts joined with newlines.
func (m *Message) Text() string { return partsText(m.Parts) }

func partsText(parts []Part) string {
	var out []byte
	first := true
	for _, p := range parts {
		if p.Text == nil {
			continue
		}
		if !first {
			out = append(out, '\n')
		}
		out = append(out, *p.Text...)
		first = false
	}
	return string(out)
}

// Timestamp is a time that marshals as ISO 8601 UTC with milliseconds and a Z, as A2A requires.
type Timestamp struct{ time.Time }

const timestampLayout = "2006-01-02T15:04:05.000Z"

// MarshalJSON writes the time in UTC with milliseconds.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(timestampLayout))
}

// UnmarshalJSON accepts any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// NewTimestamp returns t, truncated to the milliseconds the wire keeps.
func NewTimestamp(t time.Time) *Timestamp { return &Timestamp{t.UTC().Truncate(time.Millisecond)} }

// TaskStatus is a task's state with the message that explains it.
type TaskStatus struct {
	State     TaskState  `json:"state"`
	Message   *Message   `json:"message,omitempty"`
	Timestamp *Timestamp `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// Text returns the artifact's text parts joined with newlines.
func (a *Artifact) Text() string { return partsText(a.Parts) }

// Task is one unit of work and everything known about it.
type Task struct {
	ID        TaskID         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// Artifact returns the task's artifact with the given name.
func (t *Task) Artifact(name string) (Artifact, bool) {
	for _, a := range t.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return Artifact{}, false
}

// TrimHistory keeps at most n of the task's most recent messages (a request's historyLength; nil:
// all; 0: none).
func (t *Task) TrimHistory(n *int) {
	switch {
	case n == nil:
	case *n <= 0:
		t.History = nil
	case len(t.History) > *n:
		t.History = t.History[len(t.History)-*n:]
	}
}

// SendMessageConfig is the configuration of a SendMessage request.
type SendMessageConfig struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	ReturnImmediately   bool     `json:"returnImmediately,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	// PushConfig is a webhook for the task the message starts.
	PushConfig *TaskPushNotificationConfig `json:"taskPushNotificationConfig,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Message       *Message           `json:"message"`
	Configuration *SendMessageConfig `json:"configuration,omitempty"`
	Metadata      map[string]any     `json:"metadata,omitempty"`
	Tenant        string             `json:"tenant,omitempty"`
}

// SendMessageResponse is the result of SendMessage: exactly one of Task and Message is set.
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// GetTaskRequest is the params of GetTask.
type GetTaskRequest struct {
	ID            TaskID `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
	Tenant        string `json:"tenant,omitempty"`
}

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	ContextID            string     `json:"contextId,omitempty"`
	Status               TaskState  `json:"status,omitempty"`
	PageSize             *int       `json:"pageSize,omitempty"`
	PageToken            string     `json:"pageToken,omitempty"`
	HistoryLength        *int       `json:"historyLength,omitempty"`
	StatusTimestampAfter *Timestamp `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     bool       `json:"includeArtifacts,omitempty"`
	Tenant               string     `json:"tenant,omitempty"`
}

// The page sizes of ListTasks.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// ListTasksResponse is the result of ListTasks.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int    `json:"pageSize"`
	TotalSize     int    `json:"totalSize"`
}

// CancelTaskRequest is the params of CancelTask.
type CancelTaskRequest struct {
	ID       TaskID         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Tenant   string         `json:"tenant,omitempty"`
}

// MaxIDBytes bounds the ids a door echoes back: no id it issues is longer, and a longer one in a request
// is never repeated whole in an answer.
const MaxIDBytes = 256

// CutID returns s, or its first MaxIDBytes bytes (on a UTF-8 boundary) followed by "…" when it is longer.
func CutID(s string) string {
	if len(s) <= MaxIDBytes {
		return s
	}
	n := MaxIDBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
