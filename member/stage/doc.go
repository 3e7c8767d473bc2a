// Package stage holds the staging checks behind `mur check` and a formation's start: Formation checks a
// roster (its members' capsules, who may call whom, door egress), Capsule checks one capsule (its
// drivers can be built, its shell programs resolve, the host can confine its commands), each answering
// Findings with the codes of DESIGN (E-CAP-*, W-RUN-*, ...); an E finding stops a start.
//
// Concurrency: pure functions over parsed values; safe from any goroutine.
//
// Imports: the leaves (capsule, driver, sandbox), roster and runtimetools; never member.
package stage
