// Package server is everything HTTP of murmur: one door per member (the chi routes, the A2A 1.0 JSON-RPC
// dispatch over sourcegraph/jsonrpc2's types, authentication, body limits, the agent card, health and
// metrics) and the launcher that starts a formation's doors.
//
// A door never holds task state of its own: it authenticates and validates a request, hands it to the
// member's session (an Executor), and maps the session's errors to wire errors once, through
// a2a.ToJSONRPC. A request that fails authentication or validation reaches no session method, so it
// changes nothing. Doors are safe for concurrent use; a Formation owns its doors, sessions and stores and
// Shutdown closes them in that order: sessions first (in-flight tasks end canceled), then listeners.
package server
