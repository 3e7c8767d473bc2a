// Package delegate is delegate-task's bookkeeping (DESIGN §11, SPEC "The delegation tool"): it resolves
// capabilities.spawn.allow into sub-capsules (Resolve), checks how deep a chain of them goes (Chain, for
// staging's E-CAP-020), and for one running task starts each delegation's sub-session, watches its task
// until it ends, its deadline passes or the calling task ends, and hands the outcomes back to the agent
// loop in rounds, to join the member answers in one continuation (calls.ContinuationMessage).
//
// A sub-session is started through Config.Start, a func the session core hands in, so this package never
// imports member: it sees a sub-session only as the small Sub interface, which Session (session.go), a
// sub-session's id and callbacks into it, implements. ResolveFor resolves a member's spawn list.
//
// Concurrency: a Tracker is safe for concurrent use; its ledger's lock (calls.Ledger) guards every
// delegation's fields, which the delegation's own goroutine and the agent loop both touch. Finish stops
// the goroutines and closes every sub-session.
//
// Usage: once a delegation's task has stopped, the usage it reports (metadata.murmur.usage) goes to
// Config.Caused, so the calling task's usage counts its sub-sessions.
//
// Tracing: the delegate-task call's span names the delegation (murmur.delegation.id), and the context it
// hands Sub.Send carries that span, so the sub-session's task span is its child in the same trace; the
// delegating task's span gets a murmur.delegation.ended event as each delegation ends.
//
// Imports: capsule, artifact, calls, records (the record types), store (a sub-session's own task store,
// Open), usage, runtimetools, internal/ids and internal/telemetry/conv; never member.
package delegate
