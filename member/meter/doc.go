// Package meter is a session's accounting (SPEC session-status): what the running task has used of its
// limits (turns, keep_working, done_check, reopens), the session's token sums and spend, and the last
// context check, and the snapshot session-status reports of them. It counts each inference call, the
// agent loop's and the harness's closed turns alike, in the metrics and the inference record, and it
// compacts the conversation when the last check found it past its threshold. It keeps what the running
// task used in tokens (member/usage): its own inference calls, and the latest usage reported by each task
// or sub-session it caused (Caused); the task carries it in metadata.murmur.usage, kept current at each
// stored change while it runs (Stamp) and set at its end (EndTask), and names the trace it ran in
// (metadata.murmur.trace_id) when its run is a recorded span (BeginTask). The inference series are
// labelled with the choice's model and provider (Labels).
//
// Concurrency: a Meter is safe for concurrent use; its own lock guards every number, so a snapshot is
// consistent in itself and never waits for the session's lock. Its lock is never held while it calls
// out (records, metrics), and callers may hold their own locks while they call it.
//
// Imports: a2a, internal/ids, member/capsule, member/driver, member/harness (a harness turn's usage),
// member/records (the record types), member/usage, runtimetools, client_golang (the inference series it is handed) and the OpenTelemetry
// API (the task's span); never member.
package meter
