// Package capsule is murmur.yaml, a member's configuration: its types (Capsule and its blocks), the
// strict parse (Load, Parse: unknown keys, wrong types and missing files are errors, each an *Error with
// the file, the line and what to write instead) and the validation across keys (a choice's context
// window, a script capsule's agent settings). Defaults are filled in, so consumers read no zero values.
//
// Concurrency: a parsed *Capsule is read-only and may be shared by any number of goroutines.
//
// Imports: roster (store.retention's type) and internal/yamldoc; never member or another member/...
// package: the drivers and the sandbox read capsule settings, not the other way round.
package capsule
