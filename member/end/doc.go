// Package end is what a task's end is made of, apart from the session that ends it: the End (how the
// task ended, its answer, the background commands still running, when), what it writes into the task
// before the task is stored (Apply, and Status, the status every change of state takes), and what it
// leaves once stored (Records, Exit, Result); and which end a task's run came to (Run.Decide: canceled,
// timed out, past the deadline, shut down, no answer, failed or answered), with the status texts of
// those ends. The session (package member) builds one End for a task that ended, or one for many ended
// at once, and hands it whole from the task's status to its records; its doc comment on endOf says who
// is told of an end, when, and under which lock.
//
// Pure: no lock, no store, no clock; safe for concurrent use on distinct tasks.
//
// Imports: a2a, internal/ids, member/calls (a state's word), member/converse (a data answer, a
// question's timeout), member/records (the record); never member.
package end
