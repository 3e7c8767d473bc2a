package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
)

// DelegationStart is how the tool call of delegate-task ended: started, or failed when the sub-session
// could not be started or did not take the task.
type DelegationStart struct {
	ID      string     // dlg_…
	Capsule string     // the bare name
	Status  CallStatus // started, failed
	Output  string     // for failed: why
}

// Delegator is what delegate-task needs of the session.
type Delegator interface {
	// Capsules returns the bare names of capabilities.spawn.allow, in its order.
	Capsules() []string
	// Delegate hands text to the sub-capsule for the running task. A refusal (nothing started, nothing
	// recorded) comes back as an error naming what is wrong.
	Delegate(ctx context.Context, task, capsule, text string) (DelegationStart, error)
}

// DelegateTask is the delegate-task tool, staged when capabilities.spawn.allow lists an entry.
type DelegateTask struct {
	Delegator Delegator
}

// delegateTaskHandoff is delegate-task's manifest text and input.
var delegateTaskHandoff = handoff{tool: "delegate-task", to: "capsule",
	toDescription:   "the sub-capsule to hand the task to",
	taskDescription: "the whole of what the sub-capsule is told",
	description: "Hands one task to a sub-capsule, which the runtime starts as a sub-session of this one. The task text is the whole of what the sub-capsule is told. " +
		"The call returns as soon as the sub-capsule holds the task, with a delegation id; its outcome arrives in this conversation, naming the delegation id, after you end your turn, " +
		"together with the answers of any member calls still out."}

// Manifest has spawn.allow's bare names as the enum of its capsule field.
func (t *DelegateTask) Manifest() Manifest {
	return delegateTaskHandoff.manifest(t.Delegator.Capsules())
}

// Run starts the delegation and renders its result: data fenced under tool:delegate-task, the note after.
func (t *DelegateTask) Run(ctx context.Context, call Call) (Result, error) {
	capsule, task, bad := delegateTaskHandoff.input(call.Input)
	if bad != "" {
		return Refused(bad), nil
	}
	st, err := t.Delegator.Delegate(ctx, call.Task, capsule, task)
	if err != nil {
		return Refused(err.Error()), nil
	}
	if st.Status != CallStatusStarted {
		body, _ := json.Marshal(orderedObject{{"delegation_id", st.ID}, {"capsule", st.Capsule}, {"status", string(st.Status)}, {"output", st.Output}})
		return Result{Status: StatusError, Output: string(body), Summary: "Delegated to " + st.Capsule + ": " + string(st.Status),
			Data: map[string]any{"delegation_id": st.ID, "capsule": st.Capsule, "status": string(st.Status), "output": st.Output},
			Note: fmt.Sprintf("[delegate-task] Delegation %s to %s ended %s: %s", st.ID, st.Capsule, st.Status, st.Output)}, nil
	}
	body, _ := json.Marshal(orderedObject{{"delegation_id", st.ID}, {"capsule", st.Capsule}, {"status", string(CallStatusStarted)}})
	return Result{Status: StatusOK, Output: string(body), Summary: "Delegated to " + st.Capsule + ": started",
		Data: map[string]any{"delegation_id": st.ID, "capsule": st.Capsule, "status": string(CallStatusStarted)},
		Note: fmt.Sprintf("[delegate-task] %s is now working on delegation %s. Its outcome is not in this result: the runtime adds it to this conversation after you end your turn. End your turn now unless you have other work to hand out.", st.Capsule, st.ID)}, nil
}
