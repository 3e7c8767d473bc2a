// Package a2a holds the A2A 1.0 wire types a murmur door speaks: messages, parts, tasks, artifacts, the
// agent card, the request and response shapes of the JSON-RPC methods, the method names, the task states,
// the protocol's error codes with their google.rpc.ErrorInfo data, and a small client for calling a door.
//
// The package imports nothing of murmur's. Its types marshal to exactly the JSON the A2A 1.0 specification
// shows (camelCase names, ProtoJSON enum names, no "kind" fields). Errors are values of *Error; the
// protocol's sentinel errors (ErrTaskNotFound, …) are matched with errors.Is, and ToJSONRPC turns any error
// into the one wire error a door sends, so the mapping from failures to codes lives in one table.
package a2a
