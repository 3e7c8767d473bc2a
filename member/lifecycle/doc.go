// Package lifecycle applies a capsule's lifecycle: settings the agent loop meets at a turn's end and at
// a tool result (SPEC "Lifecycle"): keep_working (the nudge after a turn without an answer), done_check
// (the command that verifies an answer, and the reopen when it fails, within max_task_reopens) and the
// deadline notice, given once per session. What a task used of those limits is counted by the session's
// meter (member/meter), which session-status reads.
//
// Concurrency: Rules is safe for concurrent use; it keeps one flag (the notice went out), and its
// counts are the meter's.
//
// Imports: member/capsule, member/driver (the fence), member/meter, member/records (the record types);
// never member.
package lifecycle
