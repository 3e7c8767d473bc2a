// Package calls is call-member's bookkeeping for one running task (SPEC "call-member"): a Tracker
// offers a member the task (again with backoff while it is busy, which its door's rejection says with
// metadata.murmur.busy, never with its text), polls the member's task until it ends, its deadline passes
// or the calling task ends, and hands the outcomes back to the agent loop in rounds, with the
// continuation message that tells the model what came back (ContinuationMessage) and which members below
// ended without an answer. It also accepts end-without-answer. DoorPeers reaches the other members'
// doors over HTTP with this member's peer credential. The session builds a Tracker from a Config of
// plain values and callbacks; delegation outcomes use the same continuation. Ledger is the bookkeeping
// both trackers keep (each entry ended once, delivered in rounds, recorded once): package delegate uses
// it for its delegations. Resume is the wait that follows a turn that ended with calls or delegations
// out, and the continuation that comes of it, for the agent loop and the process transport alike.
//
// Concurrency: a Tracker is safe for concurrent use; its ledger's lock guards every call's fields, which
// the call's own goroutine (reoffer, poll) and the agent loop both touch. Finish stops the goroutines.
//
// Usage: each poll that reads the member's task hands the usage it reports (metadata.murmur.usage, its
// own tree included) to Config.Caused, so the calling task's usage counts what its calls caused.
//
// Tracing: each request a call makes to a door is a CLIENT span, a child of the call's tool call span,
// and carries its trace context (traceparent) to the door it calls (DESIGN §17).
//
// Imports: a2a, roster, runtimetools, member/records (the record types), member/usage, internal/ids,
// internal/peercred, internal/telemetry/conv and the OpenTelemetry API; never member.
package calls
