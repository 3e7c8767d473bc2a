package artifact

import (
	"errors"
	"fmt"
	"strings"
)

// The stable codes this package's errors carry (DESIGN §7), printed as CODE: message.
const (
	CodeReserved = "E-CAP-013"       // an artifact's tool name is a reserved runtime-provided tool name
	CodeWITLevel = "E-WIT-LEVEL-001" // the artifact asks for a WIT level this mur does not serve
	CodeOwner    = "E-REG-010"       // a source answers for another owner than murmur.lock records
)

// Kind is the token a refusal of pull-artifact or remove-artifact opens with (SPEC "Refusals").
type Kind string

// The refusal tokens, without their colon.
const (
	NotGranted   Kind = "not-granted"
	NotFound     Kind = "not-found"
	DoesNotFit   Kind = "does-not-fit"
	NotFetched   Kind = "not-fetched"
	NotRemovable Kind = "not-removable"
)

// One sentinel per refusal token: errors.Is(err, ErrNotFound) holds for a *Refusal of that kind.
var (
	ErrNotGranted   = errors.New("not-granted")
	ErrNotFound     = errors.New("not-found")
	ErrDoesNotFit   = errors.New("does-not-fit")
	ErrNotFetched   = errors.New("not-fetched")
	ErrNotRemovable = errors.New("not-removable")
)

var kindSentinel = map[Kind]error{
	NotGranted: ErrNotGranted, NotFound: ErrNotFound, DoesNotFit: ErrDoesNotFit,
	NotFetched: ErrNotFetched, NotRemovable: ErrNotRemovable,
}

// Refusal is a pull or removal refused, as the model is told it: Error() is the whole tool error text,
// "<token>: [<code>: ]<message>", ready to be returned word for word.
type Refusal struct {
	Kind Kind
	Code string // "", or E-CAP-013, E-WIT-LEVEL-001, E-REG-010
	Msg  string
	// NewestFitting is, for DoesNotFit, the newest version that fits this mur ("" when none does).
	NewestFitting string
	Err           error // the underlying problem, if any; not part of the text
}

func (r *Refusal) Error() string {
	if r.Code != "" {
		return string(r.Kind) + ": " + r.Code + ": " + r.Msg
	}
	return string(r.Kind) + ": " + r.Msg
}

// Is makes errors.Is(err, ErrNotFound) (and the other sentinels) true for a refusal of that kind.
func (r *Refusal) Is(target error) bool { return kindSentinel[r.Kind] == target }

// Unwrap returns the underlying problem.
func (r *Refusal) Unwrap() error { return r.Err }

func refuse(kind Kind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// ErrReserved is matched by a *ReservedError.
var ErrReserved = errors.New("reserved tool name")

// ReservedError is an artifact whose tool name is a reserved runtime-provided tool name (SPEC "Reserved
// names"): E-CAP-013, at staging, in murmur.lock and on a pull alike.
type ReservedError struct{ Name string }

func (e *ReservedError) Error() string {
	tool := Name(e.Name).Tool()
	return fmt.Sprintf("%s: %s: its tool name %q is reserved for the runtime-provided tool of that name, whether or not this capsule is granted it; rename the artifact (the part after /), or remove it",
		CodeReserved, e.Name, tool)
}

// Is makes errors.Is(err, ErrReserved) true.
func (e *ReservedError) Is(target error) bool { return target == ErrReserved }

// CheckReserved returns a *ReservedError when name's tool name (the part after '/', version left out) is
// reserved: the check staging makes on every declared artifact before anything is read.
func CheckReserved(name string) error {
	if reserved(name) {
		n, _, _ := strings.Cut(name, "@")
		return &ReservedError{Name: n}
	}
	return nil
}

// ErrConflict is matched by a *ConflictError.
var ErrConflict = errors.New("murmur.lock conflict")

// ConflictError is a pin refused because murmur.lock pins the same name at another version or digest.
// Its text is SPEC's "murmur.lock conflict for '<name>': …".
type ConflictError struct {
	Pinned Pin // what murmur.lock holds
	Want   Pin // what was to be pinned
}

func (e *ConflictError) Error() string {
	p, w := e.Pinned, e.Want
	if p.Version != w.Version {
		return fmt.Sprintf("murmur.lock conflict for '%s': murmur.lock pins version %s, not %s; pull %s@%s to use the pinned version, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) and pull again",
			p.Name, p.Version, w.Version, p.Name, p.Version)
	}
	return fmt.Sprintf("murmur.lock conflict for '%s': murmur.lock pins version %s with digest %s, but the copy in the %s has digest %s, so its files changed after it was pinned; restore the pinned files, or remove the pin first (remove-artifact for a pin the agent made; the operator edits murmur.lock for one of theirs) to accept the new ones",
		p.Name, p.Version, p.Digest, placePhrase(w.Source), w.Digest)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// placePhrase names a place inside a sentence: "project store", "global store", "source github:o/r".
func placePhrase(p Place) string {
	if strings.HasPrefix(string(p), "github:") {
		return "source " + string(p)
	}
	return string(p)
}

// ErrOwner is matched by an *OwnerError.
var ErrOwner = errors.New("source owner changed")

// OwnerError is a source answering for another GitHub owner than murmur.lock records for its scope
// (E-REG-010): the repository changed hands, or sources.yaml points elsewhere than it did.
type OwnerError struct {
	Scope    string
	Source   Source
	Recorded int64
	Got      int64
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("%s: %s answers for GitHub owner id %d, but murmur.lock records owner id %d for scope %s; the repository may have changed hands: check it, then point the scope at the right repository in .murmur/sources.yaml, or (trusting the new owner) change the scope's owner in murmur.lock",
		CodeOwner, e.Source, e.Got, e.Recorded, e.Scope)
}

// Is makes errors.Is(err, ErrOwner) true.
func (e *OwnerError) Is(target error) bool { return target == ErrOwner }

// ErrPayload is wrapped by the manifest problems where an artifact's role disagrees with its payload (a
// tool without its module, a skill without its text): SPEC refuses those not-granted.
var ErrPayload = errors.New("role disagrees with payload")

// payloadError marks a manifest problem as a role/payload disagreement.
type payloadError struct{ err *Error }

func (e *payloadError) Error() string   { return e.err.Error() }
func (e *payloadError) Unwrap() []error { return []error{e.err, ErrPayload} }

// isPayload reports whether any problem in err is a role/payload disagreement.
func isPayload(err error) bool { return errors.Is(err, ErrPayload) }

// Token returns the refusal's token, for counting refusals by kind.
func (r *Refusal) Token() string { return string(r.Kind) }

// Token returns "conflict", for counting refusals by kind.
func (e *ConflictError) Token() string { return "conflict" }
