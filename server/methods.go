package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// This file is the door's methods: dispatch names the handler of each, and each handler decodes its own
// params, checks them and runs. SendMessage's is in send.go; the push notification configs' in push.go.

// call is one request as a method's handler gets it: who sent it, the tasks it may see, its params still
// raw, and release, which gives back the request's admission: a handler that waits (a blocking
// SendMessage) or streams calls it first.
type call struct {
	caller  Caller
	scope   store.Scope
	params  json.RawMessage
	release func()
}

// dispatch runs one method for c.caller. A peer may use a method only if the roster lets it reach this
// member, and sees only the tasks it sent.
func (d *Door) dispatch(ctx context.Context, method a2a.Method, c call) (any, error) {
	c.scope = store.OperatorScope()
	if c.caller.Principal == Peer && knownMethod(string(method)) {
		if !d.mayCall(c.caller.Member) {
			return nil, a2a.ErrUnauthorized.WithMeta("caller", c.caller.Member).With(fmt.Sprintf(
				"member %s may not call %s: roster.yaml has no reach rule from %s to %s", c.caller.Member, d.cfg.Member, c.caller.Member, d.cfg.Member))
		}
		c.scope = store.PeerScope(c.caller.Member)
	}
	switch method {
	case a2a.MethodSendMessage:
		return d.onSendMessage(ctx, c)
	case a2a.MethodSendStreamingMessage:
		return d.onSendStreamingMessage(ctx, c)
	case a2a.MethodGetTask:
		return d.onGetTask(ctx, c)
	case a2a.MethodListTasks:
		return d.onListTasks(ctx, c)
	case a2a.MethodCancelTask:
		return d.onCancelTask(ctx, c)
	case a2a.MethodSubscribeToTask:
		return d.onSubscribeToTask(ctx, c)
	case a2a.MethodCreatePushConfig:
		return d.onCreatePushConfig(ctx, c)
	case a2a.MethodGetPushConfig:
		return d.onGetPushConfig(ctx, c)
	case a2a.MethodListPushConfigs:
		return d.onListPushConfigs(ctx, c)
	case a2a.MethodDeletePushConfig:
		return d.onDeletePushConfig(ctx, c)
	case a2a.MethodGetExtendedAgentCard:
		return nil, a2a.ErrUnsupportedOperation.With(
			"GetExtendedAgentCard needs an extended agent card, which this door's agent card does not declare; read /.well-known/agent-card.json")
	}
	return nil, a2a.ErrMethodNotFound.WithMeta("method", a2a.CutID(string(method))).With(fmt.Sprintf(
		"method %q not found: this door serves the A2A 1.0 methods: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask and the four TaskPushNotificationConfig methods", a2a.CutID(string(method))))
}

// knownMethod reports whether the door serves m (a method it answers as unsupported included).
func knownMethod(m string) bool {
	switch a2a.Method(m) {
	case a2a.MethodSendMessage, a2a.MethodSendStreamingMessage, a2a.MethodGetTask, a2a.MethodListTasks,
		a2a.MethodCancelTask, a2a.MethodSubscribeToTask, a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig,
		a2a.MethodListPushConfigs, a2a.MethodDeletePushConfig, a2a.MethodGetExtendedAgentCard:
		return true
	}
	return false
}

// onGetTask reads a task. Without a historyLength the task is answered as it is kept, not decoded.
func (d *Door) onGetTask(ctx context.Context, c call) (any, error) {
	var req a2a.GetTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	noteTaskID(ctx, req.ID)
	if err := checkTaskID("id", req.ID, "the id of the task to read"); err != nil {
		return nil, err
	}
	if err := checkHistoryLength("historyLength", req.HistoryLength); err != nil {
		return nil, err
	}
	if req.HistoryLength == nil {
		body, err := d.cfg.Executor.GetJSON(ctx, req.ID, c.scope)
		return json.RawMessage(body), err
	}
	return d.cfg.Executor.Get(ctx, req.ID, req.HistoryLength, c.scope)
}

// onListTasks lists a page of the tasks the caller may see. Every parameter is optional: none means
// the defaults.
func (d *Door) onListTasks(ctx context.Context, c call) (any, error) {
	var req a2a.ListTasksRequest
	params := c.params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if err := decodeParams(params, &req); err != nil {
		return nil, err
	}
	size, err := checkList(&req)
	if err != nil {
		return nil, err
	}
	q := store.ListQuery{ContextID: req.ContextID, State: req.Status, PageSize: size, PageToken: req.PageToken}
	if req.StatusTimestampAfter != nil {
		q.After = req.StatusTimestampAfter.Time
	}
	page, err := d.cfg.Executor.List(ctx, q, c.scope)
	if err != nil {
		return nil, err
	}
	out := a2a.ListTasksResponse{Tasks: make([]a2a.Task, 0, len(page.Tasks)), NextPageToken: page.NextPageToken,
		PageSize: size, TotalSize: page.Total}
	for _, t := range page.Tasks {
		t.TrimHistory(req.HistoryLength)
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, *t)
	}
	return out, nil
}

// onCancelTask cancels a task; a task already canceled is answered as it is.
func (d *Door) onCancelTask(ctx context.Context, c call) (any, error) {
	var req a2a.CancelTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	noteTaskID(ctx, req.ID)
	if err := checkTaskID("id", req.ID, "the id of the task to cancel"); err != nil {
		return nil, err
	}
	return d.cfg.Executor.Cancel(ctx, req.ID, c.scope)
}

// onSendStreamingMessage starts a task as SendMessage does and answers with its stream.
func (d *Door) onSendStreamingMessage(ctx context.Context, c call) (any, error) {
	if d.cfg.Events == nil {
		return nil, errNoStreaming(a2a.MethodSendStreamingMessage)
	}
	var req a2a.SendMessageRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	c.release()
	return d.openStream(c.caller, func() (*stream, error) { return d.sendStreamingMessage(ctx, c.caller, &req, c.scope) })
}

// onSubscribeToTask answers with the stream of a task that has not ended.
func (d *Door) onSubscribeToTask(ctx context.Context, c call) (any, error) {
	if d.cfg.Events == nil {
		return nil, errNoStreaming(a2a.MethodSubscribeToTask)
	}
	var req a2a.SubscribeToTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	c.release()
	return d.openStream(c.caller, func() (*stream, error) { return d.subscribeToTask(ctx, &req, c.scope) })
}

// errNoStreaming refuses a streaming method of a door whose card does not declare streaming.
func errNoStreaming(method a2a.Method) error {
	return a2a.ErrUnsupportedOperation.With(fmt.Sprintf(
		"%s needs streaming, which this door's agent card does not declare; use SendMessage and GetTask", method))
}

// decodeParams decodes params into v. Every field may be named by its JSON name (taskId) or by its proto
// field name (task_id), as ProtoJSON parsers accept (a2a.JSONNames), the same field under both names with
// different values being refused. Unknown fields are ignored, as A2A says; missing params and values of
// the wrong type are invalid params naming the field.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "params", Description: "required: this method takes a params object"})
	}
	params, err := a2a.JSONNames(params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return a2a.InvalidParams(a2a.FieldViolation{Field: field,
				Description: fmt.Sprintf("expected %s, got a JSON %s", te.Type, te.Value)})
		}
		return a2a.InvalidParams(a2a.FieldViolation{Field: "params", Description: err.Error()})
	}
	return nil
}

// mayCall reports whether the roster lets member reach this door's member.
func (d *Door) mayCall(name string) bool {
	return d.cfg.Roster != nil && d.cfg.Roster.MayCall(name, d.cfg.Member)
}

// isMember reports whether name is a member of this door's formation.
func (d *Door) isMember(name string) bool {
	if d.cfg.Roster == nil {
		return false
	}
	_, ok := d.cfg.Roster.Member(name)
	return ok
}
