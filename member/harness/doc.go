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
// The package starts programs only through the Starter its caller gives it (the sandbox's confinement):
// it must not import the session core (member) nor any other member/... package, and it knows nothing of
// tools or MCP.
package harness
