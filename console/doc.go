// Package console serves the formation console: web pages that show a formation at work (its members,
// their doors and state, the roster's reachability graph, the tasks of each member, live) and let the
// operator act on it (send a message, continue a context, cancel a task).
//
// It is a client of the formation, nothing more: it reads the doors through their A2A JSON-RPC interface
// (ListTasks polled to find tasks, SubscribeToTask streams to follow each task that has not ended, GetTask;
// CancelTask and SendMessage when the operator acts), and a replicated member's GET /replicas, with the
// operator token, and the sessions' records by tailing the trace.jsonl files under the records root. It keeps no
// state of its own beyond what it polled and read, and its login sessions.
//
// Security: the console listens on loopback by default. Opening it needs the operator token, through a
// one-time login code carried by the printed URL (or the token itself, typed into the login form); the
// login sets an HttpOnly, SameSite=Strict session cookie. Every state-changing request also carries the
// session's anti-CSRF token, and requests from other origins (Origin or Sec-Fetch-Site) are refused.
//
// Concurrency: a Console is safe for concurrent use by its HTTP handlers. Start launches one poller
// per member and one records tailer; Close stops them and waits for them. Each server-sent-events stream
// ends when its request's context ends (the browser went away) or the console closes.
//
// Imports: a2a, roster and member/records (the record types it reads; a leaf of the standard library) of
// ours, the standard library. It must not import member or server, and nothing below cmd/mur may import
// it (it is HTTP, and member/ must stay free of it).
package console
