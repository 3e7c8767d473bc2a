package peerfile

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/murmur-run/murmur/internal/kinderr"
)

// The failures of a peer-file handoff, each with the reason a door or a record names it by and the HTTP
// status a door answers it with. Match them with errors.Is; an *Error carries one of them with the
// sentence that says what was wrong.
var (
	ErrUnauthenticated = failure("no formation token", "unauthenticated", http.StatusUnauthorized)
	ErrForbidden       = failure("not the formation token", "forbidden", http.StatusForbidden)
	ErrMalformed       = failure("not a peer-file handle", "malformed", http.StatusBadRequest)
	ErrWrongFormation  = failure("minted in another formation", "wrong_formation", http.StatusForbidden)
	ErrWrongMember     = failure("minted by another member", "wrong_member", http.StatusNotFound)
	ErrUnknownMember   = failure("minted by a member not in the roster", "unknown_member", http.StatusNotFound)
	ErrForged          = failure("the signature does not match", "forged", http.StatusForbidden)
	ErrExpired         = failure("the handle has expired", "expired", http.StatusGone)
	ErrNotExported     = failure("no export root", "not_exported", http.StatusNotFound)
	ErrBadPath         = failure("not a path inside the root", "bad_path", http.StatusBadRequest)
	ErrNotFound        = failure("no such file", "not_found", http.StatusNotFound)
	ErrChanged         = failure("the file changed", "changed", http.StatusConflict)
	ErrNotRegular      = failure("not a regular file", "not_regular", http.StatusConflict)
	ErrOutside         = failure("leads outside the root", "outside", http.StatusConflict) // an older door's reason
	ErrLink            = failure("a symbolic link", "symlink", http.StatusConflict)
	ErrUnreadable      = failure("cannot be read", "unreadable", http.StatusInternalServerError)
	ErrTooLarge        = failure("larger than the limit", "too_large", http.StatusRequestEntityTooLarge)
	ErrDigestMismatch  = failure("the bytes do not match the digest", "digest_mismatch", http.StatusBadGateway)
	ErrTargetExists    = failure("the target exists", "target_exists", http.StatusConflict)
)

// wire is the one table from failures to the reason a door or a record names and the door's HTTP status,
// in the order the failures are declared above; failure fills it.
var wire []wireKind

type wireKind struct {
	err    error
	reason string
	status int
}

// failure declares one kind of failure and enters it in wire.
func failure(text, reason string, status int) error {
	err := errors.New(text)
	wire = append(wire, wireKind{err, reason, status})
	return err
}

// Error is a failure of one kind (a sentinel above) with the sentence that says what was wrong.
type Error = kinderr.Error

func fail(kind error, format string, args ...any) error { return kinderr.New(kind, format, args...) }

// Reason names err's kind on the wire and in records: "expired", "forged", …; "internal" for any other.
func Reason(err error) string {
	for _, w := range wire {
		if errors.Is(err, w.err) {
			return w.reason
		}
	}
	return "internal"
}

// Status is the HTTP status a door answers err with; 500 for an error of no kind above.
func Status(err error) int {
	for _, w := range wire {
		if errors.Is(err, w.err) {
			return w.status
		}
	}
	return http.StatusInternalServerError
}

// FromReason returns the failure a door's reason names, or nil for a reason this build does not know.
func FromReason(reason string) error {
	for _, w := range wire {
		if w.reason == reason {
			return w.err
		}
	}
	return nil
}

// DigestHeader is the header the door sends a file's SHA-256 in (RFC 9530).
const DigestHeader = "Repr-Digest"

// FormatDigest is d as a Repr-Digest value: sha-256=:<base64>:.
func FormatDigest(d [32]byte) string {
	return "sha-256=:" + base64.StdEncoding.EncodeToString(d[:]) + ":"
}

// ParseDigest reads the sha-256 member of a Repr-Digest value.
func ParseDigest(v string) (d [32]byte, ok bool) {
	for _, member := range strings.Split(v, ",") {
		key, val, found := strings.Cut(strings.TrimSpace(member), "=")
		if !found || key != "sha-256" || len(val) < 2 || val[0] != ':' || val[len(val)-1] != ':' {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(val[1 : len(val)-1])
		if err != nil || len(b) != len(d) {
			return d, false
		}
		copy(d[:], b)
		return d, true
	}
	return d, false
}
