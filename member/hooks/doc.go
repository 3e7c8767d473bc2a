// Package hooks runs a capsule's policy hooks (DESIGN §10): artifacts of runtime hook that murmur.yaml
// declares under hooks:, called at two moments.
//
//   - on-tool-call, before every tool call, the runtime-provided tools included (SPEC's "Policy" rows),
//     receives {"event": "on-tool-call", "tool", "input", "task", "trust"} and answers
//     {"decision": "allow" | "deny", "reason": "…"}. Every hook of the event must allow: the first deny,
//     in declaration order, decides, and the call is refused with "denied by policy <hook>: <reason>"
//     and a tool_denied record. A hook that fails (cannot run, times out, exits non-zero, answers anything
//     but that object) denies, and says so: a hook_failed record and the refusal's reason.
//   - on-task-end, once an attempt at a task has ended, receives {"event": "on-task-end", "task",
//     "status", "answer", "trust", "reopens"} and answers {} or {"reopen": "<message>"}: the first hook
//     that asks reopens the task with that message (the caller counts it against
//     lifecycle.max_task_reopens and writes task_reopened). A hook that fails does nothing, and says so
//     in a hook_failed record.
//
// A hook's program is run by a Runner the session hands in: a WebAssembly module on the same runner as
// tool artifacts (the workdir its only directory, no network), or a command under the same confinement
// as shell binaries. The input JSON is on its stdin. A command's answer is the JSON object on its
// stdout; a module answers as a tool does, {"status": "ok", "data": <the answer>}, and its Runner hands
// back the data, so this package reads one answer whatever ran. Hooks never see a credential.
//
// Each run of a hook is a span, "murmur.hook {event}" with the hook's name, the event and its outcome,
// the child of the span of the tool call or task it ran for (package member/spans/nest).
//
// The package is a leaf: it imports nothing of murmur's but the span names (internal/telemetry/conv),
// member/spans/nest, the trust classes (internal/ids) and the record types (member/records, a leaf), and
// runs what it is given (it never imports member). A Set is safe for concurrent use once built; each call
// runs the hooks one at a time, in declaration order.
package hooks
