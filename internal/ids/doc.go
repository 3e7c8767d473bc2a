// Package ids names what several packages of a formation must spell the same way: the keys of
// metadata.murmur, murmur's entry in an A2A task's or message's metadata (written by the session and by
// call-member, read by the door, the peer client and call-member's follow-up), and the settings that
// control.agent_settings may hand the agent. Each is a typed constant here, so a misspelling is a
// compile error instead of a silent miss.
//
// Concurrency: constants and pure functions only.
//
// Imports: stdlib only; every murmur package may import it.
package ids
