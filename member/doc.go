// Package member is the session core of one member of a formation: the Session that takes tasks one at a
// time (the queue, cancel, the session deadline), the task executor, the agent loop of an agent capsule,
// the one command of a script capsule and the one function that dispatches a tool call (dispatch: staged
// tools only, the fence, the deadline notice, its record). Everything else is a package below it, each
// with a Config of plain values and callbacks: capsule (murmur.yaml), store (the task store and whose
// tasks a request sees), driver (inference), sandbox (commands, a script capsule's run), calls
// (call-member and the peers' doors), share (peer files), stage (staging checks), records (trace.jsonl),
// artifact/staged (a session's artifacts, tool runs and hooks), harness (the process transport), admit
// (the admission gate), events (streams and waiters' signals), control (the control surface's change),
// setup (what Start builds and the session_start record), delegate (sub-sessions), meter (session-status
// accounting), lifecycle (keep_working, done_check, the deadline notice), metrics (the Prometheus series),
// queue (the state of the session's tasks, which its lock guards), attempt (an agent task's member calls,
// delegations and end hooks), replica (a session's side of its member's replicas); none imports member.
//
// Contract: a Session acknowledges a state change only after the store has committed it; tasks run one
// at a time in submission order, the next one starting while the previous one's end is committed (the
// end is seen only once durable: settle); Cancel ends a task's context and waits for the task to end canceled;
// Close cancels everything and returns once the executor goroutine has exited. The package never touches
// an http.ResponseWriter: the server package maps its errors, which wrap a2a's protocol errors, to the
// wire.
//
// Tracing (tracing.go, DESIGN §17): a task's run is an invoke_agent span, the child of the span of the
// request that sent it (the trace context waits in the queue with the task); its inference calls are
// chat spans and its tool calls execute_tool spans, on Config.TracerProvider, through the OpenTelemetry
// API alone.
package member
