package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// CallStart is how the tool call of call-member ended: started, busy, rejected or failed.
type CallStart struct {
	CallID string
	Member string
	Status CallStatus // started, busy, rejected, failed
	TaskID string     // the member's task, when started
	Output string     // for busy, rejected and failed: SPEC's sentence
	// Caller is the formation member that sent the calling task, "" for none.
	Caller string
	// DeadlineSecs is the call's deadline, lifecycle.delegation_deadline_secs.
	DeadlineSecs int
}

// MemberCaller is what call-member needs of the session.
type MemberCaller interface {
	// Callable returns the members this one may call, in roster order.
	Callable() []string
	// CallMember makes the call for the running task. A refusal (nothing sent, nothing recorded as a
	// member call) comes back as an error whose text is SPEC's.
	CallMember(ctx context.Context, task, member, text string) (CallStart, error)
}

// CallMember is the call-member tool, staged for a member the roster lets call at least one other.
type CallMember struct {
	Members MemberCaller
}

// callMemberHandoff is call-member's manifest text and input.
var callMemberHandoff = handoff{tool: "call-member", to: "member",
	toDescription:   "the formation member to hand the task to",
	taskDescription: "the whole of what the member is told",
	description: "Hands one task to another member of this formation. The task text is the whole of what the member is told, so any file content it needs goes in the task text. " +
		"The call returns at once with a call id: started when the member holds the task, or busy when it has no room, in which case the runtime keeps offering the task until the member takes it or the call's deadline passes. " +
		"The member's answer arrives in this conversation, naming the call id, after you end your turn. " +
		"A second call to a member before its answer has arrived is refused."}

// Manifest has the callable members as the enum of its member field.
func (t *CallMember) Manifest() Manifest { return callMemberHandoff.manifest(t.Members.Callable()) }

// Run makes the call and renders its result: data fenced under tool:call-member, the note after it.
func (t *CallMember) Run(ctx context.Context, call Call) (Result, error) {
	member, task, bad := callMemberHandoff.input(call.Input)
	if bad != "" {
		return Refused(bad), nil
	}
	if strings.TrimSpace(task) == "" {
		return Refused("'call-member' needs a task: the whole of what " + member + " is told."), nil
	}
	st, err := t.Members.CallMember(ctx, call.Task, member, task)
	if err != nil {
		// SPEC's four refused calls: nothing was sent.
		return Refused(err.Error()), nil
	}
	data := map[string]any{"call_id": st.CallID, "member": st.Member, "status": string(st.Status)}
	if st.Status == CallStatusStarted {
		data["task_id"] = st.TaskID
	} else {
		data["output"] = st.Output
	}
	body, _ := json.Marshal(orderedObject{{"call_id", st.CallID}, {"member", st.Member}, {"status", string(st.Status)}, lastField(st)})
	res := Result{Output: string(body), Data: data, Summary: "Called " + st.Member + ": " + string(st.Status)}
	m, id := st.Member, st.CallID
	switch st.Status {
	case CallStatusStarted:
		res.Status = StatusOK
		res.Note = fmt.Sprintf("[call-member] %s is now working on call %s. Its answer is not in this result and no tool fetches it: the runtime adds it to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling %s again before its answer arrives is refused.", m, id, m)
	case CallStatusBusy:
		res.Status = StatusOK
		res.Note = fmt.Sprintf("[call-member] %s is busy with other work and has not taken call %s yet. The runtime keeps offering it the task for up to %ds and adds %s's answer, or word that it stayed busy, to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling %s again before then is refused.", m, id, st.DeadlineSecs, m, m)
	default:
		res.Status = StatusError
		res.Note = fmt.Sprintf("[call-member] Call %s to %s ended %s, with no answer from %s. Do not present an answer of your own as %s's.", id, m, st.Status, m, m)
		if st.Caller != "" {
			res.Note += fmt.Sprintf(" If you have no answer to give without %s, call end-without-answer with the reason: the runtime then tells %s plainly that you gave none.", m, st.Caller)
		}
	}
	return res, nil
}

func lastField(st CallStart) kv {
	if st.Status == CallStatusStarted {
		return kv{"task_id", st.TaskID}
	}
	return kv{"output", st.Output}
}

// NoAnswerEnder is what end-without-answer needs of the session.
type NoAnswerEnder interface {
	// EndWithoutAnswer marks the running task to end without an answer once this turn's tool calls
	// finish, and returns the member that sent it; a refusal comes back as an error whose text is SPEC's.
	EndWithoutAnswer(task, reason string) (caller string, err error)
}

// EndWithoutAnswer is the end-without-answer tool, staged exactly where call-member is.
type EndWithoutAnswer struct {
	Ender NoAnswerEnder
}

// Manifest describes end-without-answer.
func (t *EndWithoutAnswer) Manifest() Manifest {
	return NativeManifest("end-without-answer",
		"Ends the task another formation member sent you without an answer. Use it instead of replying when you have no answer to give, usually because a member you called gave you none. "+
			"The reason is passed to the member that sent the task: the runtime tells that member plainly that no answer came, and names each member you called that gave none. "+
			"It is refused while a call you made is still out, and for a task no formation member sent.",
		json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","description":"why there is no answer, in a sentence"}},"required":["reason"]}`))
}

// Run accepts or refuses the ending.
func (t *EndWithoutAnswer) Run(_ context.Context, call Call) (Result, error) {
	var in struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(call.Input, &in) // the reason is optional: input without one ends with none
	caller, err := t.Ender.EndWithoutAnswer(call.Task, in.Reason)
	if err != nil {
		return Refused(err.Error()), nil
	}
	body, _ := json.Marshal(orderedObject{{"status", "ending"}, {"caller", caller}})
	return Result{Status: StatusOK, Output: string(body), Summary: "Ending task without an answer",
		Data: map[string]any{"status": "ending", "caller": caller},
		Note: fmt.Sprintf("[end-without-answer] This task ends without an answer once this turn's tool calls finish, and %s is told you gave none. The other tool calls of the same turn still run.", caller)}, nil
}
