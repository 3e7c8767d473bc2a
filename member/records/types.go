package records

// Type is a record's type: the "type" of its line in trace.jsonl (DESIGN §6).
type Type string

// The record types. A record's fields are written where it is.
const (
	// The session.
	TypeSessionStart  Type = "session_start"
	TypeSessionEnd    Type = "session_end"
	TypeSessionStatus Type = "session_status"
	TypePeerRefused   Type = "peer_refused"

	// A task's life.
	TypeTaskStart      Type = "task_start"
	TypeTaskEnd        Type = "task_end"
	TypeTaskFailed     Type = "task_failed"
	TypeTaskContinued  Type = "task_continued"
	TypeTaskReopened   Type = "task_reopened"
	TypeKeepWorking    Type = "keep_working"
	TypeDeadlineNotice Type = "deadline_notice"
	TypeInputRequired  Type = "input_required"
	TypeInputReceived  Type = "input_received"

	// The model and the harness.
	TypeInference     Type = "inference"
	TypeCompaction    Type = "compaction"
	TypeHarnessRun    Type = "harness_run"
	TypeHarnessNotice Type = "harness_notice"
	TypeHarnessOutput Type = "harness_output"

	// Tools and hooks.
	TypeToolCall          Type = "tool_call"
	TypeToolDenied        Type = "tool_denied"
	TypeToolsRefreshed    Type = "tools_refreshed"
	TypePlan              Type = "plan"
	TypeBackgroundCommand Type = "background_command"
	TypeHookFailed        Type = "hook_failed"
	TypeHookReopenRefused Type = "hook_reopen_refused"
	TypeArtifactPulled    Type = "artifact_pulled"
	TypeArtifactRefused   Type = "artifact_refused"
	TypePeerFileShare     Type = "peer_file_share"
	TypePeerFileFetch     Type = "peer_file_fetch"

	// Member calls and delegations.
	TypeMemberCallBusy  Type = "member_call_busy"
	TypeMemberCallStart Type = "member_call_start"
	TypeMemberCall      Type = "member_call"
	TypeDelegationStart Type = "delegation_start"
	TypeDelegation      Type = "delegation"

	// The control surface.
	TypeControlChange  Type = "control_change"
	TypeControlRefused Type = "control_refused"
	TypeControlApplied Type = "control_applied"
)

// WriteFunc writes one record of type typ about task ("" for none); fields must not use the keys ts, type,
// session and task. (*Writer).Write is one; the packages that record something are handed one.
type WriteFunc func(typ Type, task string, fields map[string]any) error
