package server

import (
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// This file is what the door checks of a request's params before anything is run: messages and their
// parts, the media types a member takes and gives, task ids, history lengths and list pages. Every check
// answers with the A2A error a client can act on, naming the field.

// The media types a member takes in and answers with: a task is given as text and answered as text.
const (
	InputMode  = "text/plain"
	OutputMode = "text/plain"
)

// The limits of one message's parts: a task's message is stored, cached and put in front of a model, so
// its size is bounded apart from the body limit.
const (
	MaxParts        = 64
	MaxMessageBytes = 1 << 20
)

// checkSend checks the params of SendMessage and SendStreamingMessage before anything is sent.
func (d *Door) checkSend(req *a2a.SendMessageRequest) error {
	if err := validateMessage(req.Message); err != nil {
		return err
	}
	if req.Message.TaskID != "" {
		if err := checkTaskID("message.taskId", req.Message.TaskID, ""); err != nil {
			return err
		}
	}
	c := req.Configuration
	if c == nil {
		return nil
	}
	if err := checkHistoryLength("configuration.historyLength", c.HistoryLength); err != nil {
		return err
	}
	if err := checkOutputModes(c.AcceptedOutputModes); err != nil {
		return err
	}
	pc := c.PushConfig
	if pc == nil {
		return nil
	}
	if d.cfg.Push == nil {
		return a2a.ErrPushNotificationNotSupp.With("configuration.taskPushNotificationConfig needs push notifications, which this door does not offer; poll GetTask instead")
	}
	if err := d.checkPushConfig("configuration.taskPushNotificationConfig.", pc); err != nil {
		return err
	}
	if err := d.cfg.Push.CheckURL(pc.URL); err != nil {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "configuration.taskPushNotificationConfig.url", Description: err.Error()})
	}
	return nil
}

// validateMessage checks a message sent to the door: its id, role and parts, their number and size, and
// that the member can take each part in (a follow-up's by checkFollowUpModes).
func validateMessage(m *a2a.Message) error {
	if m == nil {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message", Description: "required: the message to send"})
	}
	var v []a2a.FieldViolation
	if m.MessageID == "" {
		v = append(v, a2a.FieldViolation{Field: "message.messageId", Description: "required: a unique id chosen by the sender"})
	}
	if m.Role != a2a.RoleUser && m.Role != a2a.RoleAgent {
		v = append(v, a2a.FieldViolation{Field: "message.role", Description: fmt.Sprintf("%q is not a role: use ROLE_USER", m.Role)})
	}
	if len(m.Parts) == 0 {
		v = append(v, a2a.FieldViolation{Field: "message.parts", Description: "required: at least one part, such as {\"text\": \"...\"}"})
	}
	if len(m.Parts) > MaxParts {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts",
			Description: fmt.Sprintf("%d parts: a message may have at most %d; put the content in fewer parts", len(m.Parts), MaxParts)})
	}
	if n := partBytes(m.Parts); n > MaxMessageBytes {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts",
			Description: fmt.Sprintf("the parts hold %d bytes: a message may hold at most %d (%s); send less, or hand a large file over as a peer file", n, MaxMessageBytes, humanBytes(MaxMessageBytes))})
	}
	for i, p := range m.Parts {
		if partKinds(p) != 1 {
			v = append(v, a2a.FieldViolation{Field: fmt.Sprintf("message.parts[%d]", i),
				Description: "a part holds exactly one of text, raw, url and data"})
		}
	}
	if len(v) > 0 {
		return a2a.InvalidParams(v...)
	}
	if m.TaskID != "" {
		return checkFollowUpModes(m.Parts)
	}
	return checkInputModes(m.Parts)
}

// partKinds is how many of text, raw, url and data a part holds: a part is exactly one of them.
func partKinds(p a2a.Part) int {
	n := 0
	if p.Text != nil {
		n++
	}
	if p.Raw != nil {
		n++
	}
	if p.URL != "" {
		n++
	}
	if p.Data != nil {
		n++
	}
	return n
}

// partBytes is the size of a message's content: text, raw bytes, URLs and data (as JSON).
func partBytes(parts []a2a.Part) int {
	n := 0
	for _, p := range parts {
		if p.Text != nil {
			n += len(*p.Text)
		}
		n += len(p.Raw) + len(p.URL) + len(p.Data)
	}
	return n
}

// partMediaType is the media type of a part: its mediaType, or what its kind implies.
func partMediaType(p a2a.Part) (kind, mediaType string) {
	switch {
	case p.Text != nil:
		kind, mediaType = "text", "text/plain"
	case p.Data != nil:
		kind, mediaType = "data", "application/json"
	case p.Raw != nil:
		kind, mediaType = "raw", "application/octet-stream"
	default:
		kind, mediaType = "url", "application/octet-stream"
	}
	if p.MediaType != "" {
		mediaType = p.MediaType
	}
	return kind, mediaType
}

// checkInputModes refuses a message with a part of a media type the member does not take in, naming
// the first such part: the task is given as text, so a file or data part would be lost.
func checkInputModes(parts []a2a.Part) error {
	for i, p := range parts {
		kind, mt := partMediaType(p)
		base, _, err := mime.ParseMediaType(mt)
		if err == nil && base == InputMode {
			continue
		}
		return a2a.ErrContentTypeNotSupported.WithMeta("part", strconv.Itoa(i)).With(fmt.Sprintf(
			"message.parts[%d] is a %s part of media type %s: this member takes %s only and would lose it; send the content as a text part",
			i, kind, a2a.CutID(mt), InputMode))
	}
	return nil
}

// checkFollowUpModes refuses a follow-up's file parts: a follow-up answers a task's question with text,
// or decides an approval with a data part.
func checkFollowUpModes(parts []a2a.Part) error {
	for i, p := range parts {
		if p.Data != nil {
			continue
		}
		if err := checkInputModes([]a2a.Part{p}); err != nil {
			kind, mt := partMediaType(p)
			return a2a.ErrContentTypeNotSupported.WithMeta("part", strconv.Itoa(i)).With(fmt.Sprintf(
				"message.parts[%d] is a %s part of media type %s: a follow-up answers with text, or with a data part {\"decision\": \"allow\" | \"deny\"}",
				i, kind, a2a.CutID(mt)))
		}
	}
	return nil
}

// checkOutputModes refuses acceptedOutputModes that leave out the text a member answers with.
func checkOutputModes(modes []string) error {
	if len(modes) == 0 {
		return nil
	}
	for _, m := range modes {
		if mediaTypeCovers(m, OutputMode) {
			return nil
		}
	}
	return a2a.ErrContentTypeNotSupported.WithMeta("acceptedOutputModes", a2a.CutID(strings.Join(modes, ","))).With(fmt.Sprintf(
		"configuration.acceptedOutputModes %s: this member answers in %s only; accept %s (or leave acceptedOutputModes out)",
		a2a.CutID(strings.Join(modes, ", ")), OutputMode, OutputMode))
}

// mediaTypeCovers reports whether the accepted media type (a type, "type/*" or "*/*", parameters
// ignored) covers mt.
func mediaTypeCovers(accepted, mt string) bool {
	a, _, err := mime.ParseMediaType(accepted)
	if err != nil {
		return false
	}
	if a == "*/*" || a == mt {
		return true
	}
	typ, _, _ := strings.Cut(mt, "/")
	return a == typ+"/*"
}

// checkTaskID refuses a missing id, and answers an id longer than any task id as an unknown task,
// echoing no more than a2a.MaxIDBytes of it.
func checkTaskID(field string, id a2a.TaskID, what string) error {
	switch {
	case id == "":
		return a2a.InvalidParams(a2a.FieldViolation{Field: field, Description: "required: " + what})
	case len(id) > a2a.MaxIDBytes:
		return a2a.ErrTaskNotFound.WithMeta("taskId", a2a.CutID(string(id)))
	}
	return nil
}

// checkHistoryLength refuses a negative historyLength.
func checkHistoryLength(field string, n *int) error {
	if n != nil && *n < 0 {
		return a2a.InvalidParams(a2a.FieldViolation{Field: field, Description: fmt.Sprintf("%d is negative: use 0 to omit history, or a positive count", *n)})
	}
	return nil
}

// checkList checks the params of ListTasks and returns the page size they ask for.
func checkList(req *a2a.ListTasksRequest) (size int, err error) {
	size = a2a.DefaultPageSize
	if req.PageSize != nil {
		size = *req.PageSize
		if size < 1 || size > a2a.MaxPageSize {
			return 0, a2a.InvalidParams(a2a.FieldViolation{Field: "pageSize",
				Description: fmt.Sprintf("%d is out of range: pageSize must be between 1 and %d", size, a2a.MaxPageSize)})
		}
	}
	if req.Status != "" && !req.Status.Valid() {
		return 0, a2a.InvalidParams(a2a.FieldViolation{Field: "status",
			Description: fmt.Sprintf("%q is not a task state: use a name such as TASK_STATE_COMPLETED", req.Status)})
	}
	if err := checkHistoryLength("historyLength", req.HistoryLength); err != nil {
		return 0, err
	}
	return size, nil
}
