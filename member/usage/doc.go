// Package usage is the token use a task reports in its metadata.murmur.usage (DESIGN §17): the tokens
// of its own inference calls (self), those of every task and sub-session it caused (caused: the callee
// task of each call-member call, as that task's own usage reports it, its own tree included, and the
// task of each delegate-task sub-session), and their sum (total). So one request's cost across the
// formation is read on the task the request made. Tokens only: SPEC keeps no money.
//
// The meter (member/meter) keeps a running task's Usage; call-member (member/calls) and delegate-task
// (member/delegate) read the usage of the tasks they caused with Read, and the meter writes the task's
// own with Set, at each stored change of the task while it runs and at its end.
//
// Concurrency: the types are values; nothing here keeps state.
//
// Imports: internal/ids only.
package usage
