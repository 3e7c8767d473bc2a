// Package member runs one member of a formation: its capsule (murmur.yaml), staging, the session that
// takes tasks one at a time, the task executor for script capsules and the agent loop for agent capsules,
// the inference drivers (the deterministic script driver among them), the durable task store, and the
// session's records (trace.jsonl, out/result.txt).
//
// Contract: a Session acknowledges a state change only after the store has committed it; tasks run one
// at a time in submission order; Cancel ends a task's context and waits for the task to end canceled;
// Close cancels everything and returns once the executor goroutine has exited. The package never touches
// an http.ResponseWriter: the server package maps its errors, which wrap a2a's protocol errors, to the
// wire.
package member
