package runtimetools

// CallStatus is how a call-member call or a delegate-task delegation stands (SPEC call-member's and
// delegate-task's tables): the "status" of the tool's result, of the continuation that reports its
// outcome, of its member_call or delegation record, and of an entry of metadata.murmur.noAnswerBelow.
type CallStatus string

// What the tool call returned: the call is out.
const (
	CallStatusStarted CallStatus = "started" // the member or sub-capsule holds the task
	CallStatusBusy    CallStatus = "busy"    // the member had no room; the runtime keeps offering it the task
)

// How a call or a delegation ended.
const (
	CallStatusCompleted   CallStatus = "completed"
	CallStatusNoAnswer    CallStatus = "no_answer" // the member ended its task with end-without-answer
	CallStatusFailed      CallStatus = "failed"
	CallStatusCanceled    CallStatus = "canceled"
	CallStatusRejected    CallStatus = "rejected"
	CallStatusTimedOut    CallStatus = "timed_out"
	CallStatusUnreachable CallStatus = "unreachable"
	CallStatusAbandoned   CallStatus = "abandoned" // the calling task ended first
)

// BusyRefusal is the status message of a member's TASK_STATE_REJECTED answer when it has no room for a
// task (SPEC "A busy member"). SPEC makes this text the signal: "Only a refusal with exactly the message
// task rejected: capsule is busy is offered again", so a door of any implementation that sends it is a
// busy member, and it is the one message whose text decides what the runtime does. A murmur member also
// marks the task (metadata.murmur.busy) for clients that read metadata.
const BusyRefusal = "task rejected: capsule is busy"
