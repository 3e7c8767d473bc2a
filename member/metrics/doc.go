// Package metrics is the Prometheus series of one member (DESIGN §8): tasks, inference, tool calls,
// member calls, background commands, artifact pulls and delegations, named mur_<name>_<unit>, built
// from the registerer the launcher injects (one per member, carrying its label). The session core and
// the packages it hands a series to count into them; the session tells TaskState each status change of
// a task, for the gauge of the tasks that wait for input.
//
// Concurrency: a Series is safe for concurrent use, as Prometheus collectors are; New registers once.
//
// Imports: client_golang and a2a only; never member.
package metrics
