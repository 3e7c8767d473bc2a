// Package kinderr is an error of one kind, a sentinel its package declares, with the sentence that says
// what happened: errors.Is matches the kind, Error gives the sentence. Packages that classify their
// failures this way (peerfile, member/harness) share it instead of each writing the type.
//
// Contract: an *Error is not changed once made, so it is safe to share between goroutines. Imports the
// standard library only; it must not import any package of this module.
package kinderr
