package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member"
)

// onSendMessage starts a task, or sends a follow-up to one, and answers once the task is terminal or
// interrupted; with returnImmediately, at once.
func (d *Door) onSendMessage(ctx context.Context, c call) (any, error) {
	var req a2a.SendMessageRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	if err := d.checkSend(&req); err != nil {
		return nil, err
	}
	var histLen *int
	blocking := true
	if cfg := req.Configuration; cfg != nil {
		blocking = !cfg.ReturnImmediately
		histLen = cfg.HistoryLength
	}
	task, err := d.submit(ctx, c.caller, &req, false)
	if err != nil {
		return nil, err
	}
	if task.Status.State == a2a.TaskStateRejected {
		c.release()
		d.pacer.pace(ctx)
	}
	if blocking && !task.Status.State.Terminal() {
		c.release()
		if histLen == nil && !d.cfg.AnswersMessage {
			// The answer is the task as it is kept: spliced in, not decoded and encoded again.
			body, err := d.cfg.Executor.WaitJSON(ctx, task.ID)
			if err != nil {
				return nil, err
			}
			return sendTaskResult(body), nil
		}
		if task, err = d.cfg.Executor.Wait(ctx, task.ID); err != nil {
			return nil, err
		}
	}
	if d.cfg.AnswersMessage && task.Status.State == a2a.TaskStateCompleted && task.Status.Message != nil &&
		ids.Get(ids.Murmur(task.Metadata), ids.MetaOneTurn) == true {
		return a2a.SendMessageResponse{Message: task.Status.Message}, nil
	}
	task.TrimHistory(histLen)
	return a2a.SendMessageResponse{Task: task}, nil
}

// sendTaskResult is a SendMessage result, {"task": ...}, around a stored task's JSON.
func sendTaskResult(task []byte) json.RawMessage {
	b := make([]byte, 0, len(`{"task":}`)+len(task))
	b = append(append(append(b, `{"task":`...), task...), '}')
	return b
}

// submit hands a checked message to the executor as the caller's, and keeps the push config sent with it.
// streamed says the answer is a stream of the task from its creation on.
func (d *Door) submit(ctx context.Context, caller Caller, req *a2a.SendMessageRequest, streamed bool) (*a2a.Task, error) {
	origin, err := d.origin(caller, req.Message)
	if err != nil {
		return nil, err
	}
	origin.Streamed = streamed
	if err := d.checkPushRoom(ctx, caller, req); err != nil {
		return nil, err
	}
	// A new task's push config is registered as soon as the task is stored, before it can start, so the
	// webhook gets each change from SUBMITTED on; a follow-up's, once the message is taken.
	registered := false
	if c := req.Configuration; c != nil && c.PushConfig != nil {
		origin.Stored = func(t *a2a.Task) error {
			registered = true
			return d.sendPushConfig(ctx, caller, req, t)
		}
		// A retried message's task has the config its first copy carried.
		origin.Retried = func(*a2a.Task) { registered = true }
	}
	task, err := d.cfg.Executor.Send(ctx, req.Message, origin)
	if err != nil {
		return nil, err
	}
	if !registered {
		if err := d.sendPushConfig(ctx, caller, req, task); err != nil {
			return nil, err
		}
	}
	return task, nil
}

// sendPushConfig stores the push notification config a SendMessage carried, for the task it started.
func (d *Door) sendPushConfig(ctx context.Context, caller Caller, req *a2a.SendMessageRequest, task *a2a.Task) error {
	c := req.Configuration
	if c == nil || c.PushConfig == nil || task.Status.State == a2a.TaskStateRejected {
		return nil
	}
	pc := *c.PushConfig
	pc.TaskID = task.ID
	_, err := d.createPushConfig(context.WithoutCancel(ctx), caller, "configuration.taskPushNotificationConfig.", pc)
	return err
}

// origin derives a task's origin from who sent it: the operator's tasks are trusted; a peer's carry the
// caller and trust class of its credential. What a peer's message.metadata.murmur says of its caller
// and trust must agree with the credential: a request claiming otherwise is refused and recorded.
func (d *Door) origin(caller Caller, msg *a2a.Message) (member.Origin, error) {
	if caller.Principal == Operator {
		return member.Origin{Trust: member.TrustTrusted, Origin: member.OriginOperator}, nil
	}
	meta := ids.Murmur(msg.Metadata)
	claimed, hasCaller := ids.Lookup(meta, ids.MetaCaller)
	claimedTrust, hasTrust := ids.Lookup(meta, ids.MetaTrust)
	// The claims are JSON values, strings when they are any: compared with the credential's as strings.
	if (hasCaller && claimed != caller.Member) || (hasTrust && claimedTrust != string(caller.Trust)) {
		d.cfg.Executor.RecordRefusal(map[string]any{
			"reason": "metadata_mismatch", "caller": caller.Member, "trust": string(caller.Trust),
			"claimed_caller": claimed, "claimed_trust": claimedTrust,
		})
		d.cfg.Logger.Warn("peer request refused: its metadata claims another identity than its credential",
			"caller", caller.Member, "trust", caller.Trust)
		return member.Origin{}, a2a.ErrUnauthorized.WithMeta("caller", caller.Member).With(fmt.Sprintf(
			"message.metadata.murmur claims caller %v with trust %v, but the request's credential is %s's for %s tasks: a peer's identity and trust class come from its credential",
			shortAny(claimed, caller.Member), shortAny(claimedTrust, string(caller.Trust)), caller.Member, caller.Trust))
	}
	o := member.Origin{Trust: caller.Trust, Origin: member.OriginPeer, Caller: caller.Member}
	o.CallID, _ = ids.Get(meta, ids.MetaCallID).(string)
	o.CallerTaskID, _ = ids.Get(meta, ids.MetaCallerTaskID).(string)
	return o, nil
}

// shortAny renders a claimed metadata value for an error message: what was claimed, cut, or the
// credential's own value when nothing was.
func shortAny(v any, dflt string) string {
	if v == nil {
		return dflt
	}
	b, _ := json.Marshal(v)
	return a2a.CutID(string(b))
}
