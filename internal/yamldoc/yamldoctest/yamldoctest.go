// Package yamldoctest checks, in tests and fuzz targets, the file:line errors that the parsers built on
// internal/yamldoc return (roster.yaml, murmur.yaml, script.yaml). It is for tests only; nothing outside
// a _test.go file imports it. It imports only the standard library.
package yamldoctest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Lines is how many lines YAML sees in data: it breaks lines at \n, \r, \r\n, NEL, LS and PS, and a
// break at the end of the file starts no line.
func Lines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	n := 1
	last := ' '
	for _, c := range s {
		switch c {
		case '\n', '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
		last = c
	}
	if strings.ContainsRune("\n\r\u0085\u2028\u2029", last) {
		n-- // a break that ends the file starts no line
	}
	return n
}

// Fields are what every file:line error of ours carries.
type Fields struct {
	File string
	Line int // 0 for the whole file
	Msg  string
	Fix  string
}

// CheckErrors checks a failed parse of data as the file path: a joined, non-empty list of errors, each
// an E, in line order, each naming path and a line of data, saying both what is wrong and what to write,
// and printed as "path:line: " (or "path: " for the whole file). fields reads an E's parts.
func CheckErrors[E error](t testing.TB, path string, data []byte, err error, fields func(E) Fields) {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a list of errors: %v", err, err)
	}
	errs := joined.Unwrap()
	if len(errs) == 0 {
		t.Fatalf("an error with no problem in it: %v", err)
	}
	last := 0
	for _, e := range errs {
		var fe E
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is %T, want %T", e, e, fe)
		}
		f := fields(fe)
		switch {
		case f.File != path:
			t.Fatalf("error %q names file %q, not %q", fe, f.File, path)
		case f.Line < 0 || f.Line > Lines(data):
			t.Fatalf("error %q is at line %d of a file of %d lines:\n%q", fe, f.Line, Lines(data), data)
		case f.Line < last:
			t.Fatalf("errors out of line order: %v", err)
		case strings.TrimSpace(f.Msg) == "" || strings.TrimSpace(f.Fix) == "":
			t.Fatalf("error %q does not say both what is wrong and what to write", fe)
		}
		prefix := path + ":" + strconv.Itoa(f.Line) + ": "
		if f.Line == 0 {
			prefix = path + ": "
		}
		if !strings.HasPrefix(fe.Error(), prefix) {
			t.Fatalf("error %q does not start with %q", fe, prefix)
		}
		last = f.Line
	}
}
