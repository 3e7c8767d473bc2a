// Package setup assembles what a session is built from before it takes a task: Build makes the
// drivers, probes the host's isolation, builds the command runner and the background commands, makes
// the workdir, recovers the task store, opens the records, stages the artifacts, and resolves peer
// files, the peers' doors and the spawn list; Tools stages the runtime-provided tools the capsule is
// granted and writes their manifests; Start is the session_start record. The session core calls it from member.Start and keeps what it returns.
// ClearRuntimeRoot and RemoveRuntimeDir keep a member's runtime root (run/) to the directories of its
// live sessions: the member clears it when it starts, each session removes its own when it ends; neither
// follows a symbolic link.
//
// Concurrency: Build and Tools run once, in Start, before the session is shared; they keep no state.
// What they return carries its own contract (sandbox, records, staged, share); Parts.HostIsolation
// probes the host at most once, for a session that runs no command, and is safe for concurrent use.
//
// Imports: the member/... leaves and middle packages it assembles (capsule, driver, sandbox, store,
// records, artifact/staged, share, calls, delegate), runtimetools and a2a; never member.
package setup
