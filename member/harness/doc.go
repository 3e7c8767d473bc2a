// Package harness runs an external agent harness for a capsule under transport: process (DESIGN §13):
// it reads the harness's output in one of the two dialects (claude-stream-json, murmur-jsonl) as typed
// events, and runs the harness process per task, started with the task text as its prompt and resumed
// with its own session id and the continuation message as the prompt.
//
// Contract: a Stream is used by one goroutine. Runner.Run starts one harness process and returns once it
// and everything it started are gone; it may be called from several goroutines, each run having its own
// process. Events are handed to the caller's callback in stream order, from the goroutine that called
// Run. A line that is not an event of the dialect is never fatal: it becomes a Garbage event, so bad
// output loses nothing and stops nothing.
//
// Transport is the session's side of the process transport: it starts the session's loopback tool
// server through a func its caller gives it, writes the MCP config, starts the harness confined through
// the session's sandbox runner, answers the tool server's calls through the session's one dispatch (a
// callback), and accounts for the harness's turns, quota windows and stray lines through callbacks and
// records. It is safe for concurrent use: the tool server calls CallTool from its own goroutines while
// Run runs. RunTask is one task's runs: the first with the task text, each resume with the continuation
// message once the member calls and delegations it left out have ended, all through callbacks (Task).
//
// The Runner starts programs only through the Starter its caller gives it, and knows nothing of tools or
// MCP. The package takes plain values and callbacks: it may use member/capsule, member/records (the
// record types), member/sandbox and runtimetools, and must not import the session core (member) nor member/calls, member/driver or
// member/store.
package harness
