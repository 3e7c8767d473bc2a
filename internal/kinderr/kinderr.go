package kinderr

import "fmt"

// Error is a failure of one kind (a sentinel) with the sentence that says what was wrong.
type Error struct {
	Kind   error
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Unwrap returns the kind, so errors.Is matches it.
func (e *Error) Unwrap() error { return e.Kind }

// New returns an *Error of kind whose sentence is format with args.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
