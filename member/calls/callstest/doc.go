// Package callstest is a fake of the other members' doors (calls.Peers) for the tests of call-member,
// in member/calls and in the session core: it answers offers and reads from the test's scripts and notes
// what it was asked.
//
// Contract: a *Peers is safe for concurrent use, as calls.Peers must be. Imports a2a only; never member.
package callstest
