// Package admit decides whether a new task may enter a session (DESIGN §5: busy, queue_size): a Gate
// counts the tasks the session holds (the running one and those queued under task_acceptance: queue)
// and refuses one past the limit with the session's busy text, marked Busy, or every one once the
// session refused all work (shut down, past its deadline) with the text of that first refusal. The mark,
// not the text, tells the two apart.
//
// Concurrency: a Gate is safe for concurrent use and takes no lock: a flood of senders is refused at the
// cost of an atomic load, while the session's lock is held by the executor writing a task's state.
//
// Imports: member/capsule only; never member.
package admit
