// Package records writes one session's records: trace.jsonl, one JSON object a line for every event of
// the session (task_start, tool_call, member_call, session_end, ...: a Type each), and out/result.txt,
// the last answer. A Writer is opened in the session's records directory and closed when the session
// ends; the packages that record something are handed its Write as a WriteFunc. The records of a task
// bound to a trace span (Bind) carry its trace_id and span_id, so records and spans join.
//
// Concurrency: a *Writer is safe for concurrent use; each Write appends one whole line.
//
// Imports: stdlib only; never member or another member/... package.
package records
