package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/push"
)

// PushConfigs is what a door needs of a member's push notifier.
type PushConfigs interface {
	// Create stores a config of caller's ("" the operator's, a member's name a peer's).
	Create(ctx context.Context, caller string, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error)
	Get(ctx context.Context, task a2a.TaskID, id string) (a2a.TaskPushNotificationConfig, error)
	List(ctx context.Context, task a2a.TaskID) ([]a2a.TaskPushNotificationConfig, error)
	Delete(ctx context.Context, task a2a.TaskID, id string) error
	// CheckURL checks a webhook URL against the allowlist without storing anything.
	CheckURL(url string) error
	// CheckRoom reports whether Create would now take one more config of caller's, storing nothing.
	CheckRoom(ctx context.Context, caller string) error
}

var _ PushConfigs = (*push.Notifier)(nil)

// The four push notification config methods, one handler each, as dispatch names them. Each names a
// task the caller must be able to see; a task outside the caller's scope is not found, as everywhere.

// onCreatePushConfig stores a webhook for a task's changes.
func (d *Door) onCreatePushConfig(ctx context.Context, c call) (any, error) {
	if err := d.pushSupported(a2a.MethodCreatePushConfig); err != nil {
		return nil, err
	}
	var cfg a2a.TaskPushNotificationConfig
	if err := decodeParams(c.params, &cfg); err != nil {
		return nil, err
	}
	if err := d.checkPushConfig("", &cfg); err != nil {
		return nil, err
	}
	if err := checkTaskID("taskId", cfg.TaskID, "the id of the task whose changes the webhook receives"); err != nil {
		return nil, err
	}
	if _, err := d.cfg.Executor.GetJSON(ctx, cfg.TaskID, c.scope); err != nil {
		return nil, err
	}
	return d.createPushConfig(ctx, c.caller, "", cfg)
}

// onGetPushConfig answers one config of a task.
func (d *Door) onGetPushConfig(ctx context.Context, c call) (any, error) {
	req, err := d.pushConfigRequest(ctx, a2a.MethodGetPushConfig, c)
	if err != nil {
		return nil, err
	}
	cfg, err := d.cfg.Push.Get(ctx, req.TaskID, req.ID)
	if errors.Is(err, push.ErrNotFound) {
		return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "id", Description: fmt.Sprintf(
			"task %s has no push notification config %q; ListTaskPushNotificationConfigs lists its configs", req.TaskID, a2a.CutID(req.ID))})
	}
	return cfg, err
}

// onDeletePushConfig removes one config of a task; one it does not have is deleted already.
func (d *Door) onDeletePushConfig(ctx context.Context, c call) (any, error) {
	req, err := d.pushConfigRequest(ctx, a2a.MethodDeletePushConfig, c)
	if err != nil {
		return nil, err
	}
	if err := d.cfg.Push.Delete(ctx, req.TaskID, req.ID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// onListPushConfigs answers a task's configs.
func (d *Door) onListPushConfigs(ctx context.Context, c call) (any, error) {
	if err := d.pushSupported(a2a.MethodListPushConfigs); err != nil {
		return nil, err
	}
	var req a2a.ListTaskPushNotificationConfigsRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	if err := checkTaskID("taskId", req.TaskID, "the id of the task whose configs to list"); err != nil {
		return nil, err
	}
	if _, err := d.cfg.Executor.GetJSON(ctx, req.TaskID, c.scope); err != nil {
		return nil, err
	}
	list, err := d.cfg.Push.List(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	// A task has at most push.max_configs_per_task configs: one page holds them all.
	return a2a.ListTaskPushNotificationConfigsResponse{Configs: list}, nil
}

// pushSupported refuses method when the door keeps no push notification configs.
func (d *Door) pushSupported(method a2a.Method) error {
	if d.cfg.Push == nil {
		return a2a.ErrPushNotificationNotSupp.With(fmt.Sprintf(
			"%s needs push notifications, which this door's agent card does not declare; poll GetTask instead", method))
	}
	return nil
}

// pushConfigRequest decodes and checks the params of method, Get or Delete: a task the caller may see
// and the id of one of its configs.
func (d *Door) pushConfigRequest(ctx context.Context, method a2a.Method, c call) (a2a.GetTaskPushNotificationConfigRequest, error) {
	var req a2a.GetTaskPushNotificationConfigRequest
	if err := d.pushSupported(method); err != nil {
		return req, err
	}
	if err := decodeParams(c.params, &req); err != nil {
		return req, err
	}
	if err := checkTaskID("taskId", req.TaskID, "the id of the task the config belongs to"); err != nil {
		return req, err
	}
	if req.ID == "" {
		return req, a2a.InvalidParams(a2a.FieldViolation{Field: "id", Description: "required: the id of the push notification config (ListTaskPushNotificationConfigs lists them)"})
	}
	if _, err := d.cfg.Executor.GetJSON(ctx, req.TaskID, c.scope); err != nil {
		return req, err
	}
	return req, nil
}

// checkPushConfig checks a config's fields (prefix names where it sits in the params).
func (d *Door) checkPushConfig(prefix string, c *a2a.TaskPushNotificationConfig) error {
	var v []a2a.FieldViolation
	if c.URL == "" {
		v = append(v, a2a.FieldViolation{Field: prefix + "url", Description: "required: the webhook URL the notifications are posted to"})
	}
	if len(c.ID) > 128 {
		v = append(v, a2a.FieldViolation{Field: prefix + "id", Description: "at most 128 bytes"})
	}
	if a := c.Authentication; a != nil && a.Scheme == "" {
		v = append(v, a2a.FieldViolation{Field: prefix + "authentication.scheme", Description: "required with authentication: Bearer or Basic"})
	}
	if len(v) > 0 {
		return a2a.InvalidParams(v...)
	}
	return nil
}

// createPushConfig stores c as caller's, mapping the notifier's refusals to invalid params.
func (d *Door) createPushConfig(ctx context.Context, caller Caller, prefix string, c a2a.TaskPushNotificationConfig) (any, error) {
	out, err := d.cfg.Push.Create(ctx, pushCaller(caller), c)
	if err != nil {
		return nil, pushRefusal(prefix, err)
	}
	return out, nil
}

// checkPushRoom refuses, before its task starts, a message whose push config would take its caller past
// push.max_configs_per_caller. (The bound of the task's configs is checked once the task is known to be
// the caller's: telling it before would tell a peer of a task it may not see.)
func (d *Door) checkPushRoom(ctx context.Context, caller Caller, req *a2a.SendMessageRequest) error {
	if d.cfg.Push == nil || req.Configuration == nil || req.Configuration.PushConfig == nil {
		return nil
	}
	if err := d.cfg.Push.CheckRoom(ctx, pushCaller(caller)); err != nil {
		return pushRefusal("configuration.taskPushNotificationConfig.", err)
	}
	return nil
}

// pushRefusal maps the notifier's refusals of a config (prefix: where it sits in the params) to invalid
// params; other errors are the door's own.
func pushRefusal(prefix string, err error) error {
	switch {
	case errors.Is(err, push.ErrNotAllowed):
		return a2a.InvalidParams(a2a.FieldViolation{Field: prefix + "url", Description: err.Error()})
	case errors.Is(err, push.ErrTooMany):
		return a2a.InvalidParams(a2a.FieldViolation{Field: prefix + "taskId", Description: err.Error()})
	case errors.Is(err, push.ErrTooManyOfCaller):
		return a2a.ErrInvalidParams.With("Invalid params: " + err.Error())
	}
	return err
}

// pushCaller is who a config is of, as the task store names a task's caller: "" for the operator, the
// member's name for a peer.
func pushCaller(c Caller) string {
	if c.Principal == Peer {
		return c.Member
	}
	return ""
}
