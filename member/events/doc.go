// Package events is a member's publish/subscribe hub of task events: what a door streams to
// SendStreamingMessage and SubscribeToTask clients (A2A 1.0 §3.1.2, §3.1.6) and what tells the push
// notifier that a task changed.
//
// The session publishes a task each time it has stored a change (Publish) and the agent loop's transient
// progress (Progress: a tool call running or done). The hub turns each stored change into the events a
// stream shows: an artifactUpdate per new artifact, then a statusUpdate when the status changed. It keeps
// a topic only for a task somebody subscribed to: publishing a task nobody watches costs a map look-up.
//
// Contract:
//   - Publish and Progress never block on a subscriber. Each subscriber has a bounded buffer; a
//     subscriber whose buffer is full is dropped: its channel is closed after the events already in it,
//     and Err reports ErrSlowSubscriber, so its stream ends with an error event instead of holding the
//     executor.
//   - Subscribe is atomic with publishing: the snapshot it returns is the task as of the last change the
//     subscription does not carry, so a late subscriber sees the task first and then every later change,
//     none twice and none missing. Every subscriber of a task gets the same events in the same order.
//   - A topic ends at the task's terminal status: its subscribers' channels close after the final
//     statusUpdate, and Err is nil.
//   - Observers (Observe) are called synchronously by Publish, outside the hub's lock, for every stored
//     change of every task; they must not block.
//
// Signals is the session's other half of telling a change: it wakes the Waits of one task (the door's
// blocking SendMessage) at that task's change, and no other; Signals.Wait is that wait, reading the task
// through the Holder the session gives it. Publisher is what the session core is
// handed (a Hub, or nil); Publish and ToolProgress tell it, or nobody.
//
// All methods are safe for concurrent use. The package imports only a2a and member/store of ours, and
// never member.
package events
