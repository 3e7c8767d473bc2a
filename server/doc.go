// Package server is everything HTTP of murmur: one door per member (the chi routes, the A2A 1.0 JSON-RPC
// dispatch over sourcegraph/jsonrpc2's types, authentication, body limits, the agent card, health and
// metrics, SSE streams of task events, push notification configs, the control surface) and the launcher
// that starts a formation's doors.
//
// Streams (SendStreamingMessage, SubscribeToTask) read a member/events Hub the session publishes to; a
// stream's handler owns its subscription and ends when the task ends, the client goes, the subscription
// is dropped as too slow, or CloseStreams is called. Each caller (the operator, each peer member) holds
// at most DoorConfig.MaxStreams streams open at once; past that a stream is refused before it subscribes
// or sends a task. Push configs go to a member/push Notifier, which the Formation opens after the
// session has recovered the store and closes before the store.
//
// Every JSON-RPC request is a SERVER span (tracing.go, DESIGN §17) on DoorConfig.TracerProvider,
// continuing the caller's trace when it sends a valid traceparent; the session's task runs continue it.
//
// A door never holds task state of its own: it authenticates and validates a request, hands it to the
// member's session (an Executor), and maps the session's errors to wire errors once, through
// a2a.ToJSONRPC. A request that fails authentication or validation reaches no session method, so it
// changes nothing. Doors are safe for concurrent use; a Formation owns its doors, sessions and stores and
// Shutdown closes them in that order: sessions first (in-flight tasks end canceled), then listeners.
package server
