package peerfile

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/murmur-run/murmur/internal/kinderr"
)

// The failures of a peer-file handoff. Match them with errors.Is; an *Error carries one of them with the
// sentence that says what was wrong.
var (
	ErrUnauthenticated = errors.New("no formation token")
	ErrForbidden       = errors.New("not the formation token")
	ErrMalformed       = errors.New("not a peer-file handle")
	ErrWrongFormation  = errors.New("minted in another formation")
	ErrWrongMember     = errors.New("minted by another member")
	ErrUnknownMember   = errors.New("minted by a member not in the roster")
	ErrForged          = errors.New("the signature does not match")
	ErrExpired         = errors.New("the handle has expired")
	ErrNotExported     = errors.New("no export root")
	ErrBadPath         = errors.New("not a path inside the root")
	ErrNotFound        = errors.New("no such file")
	ErrNotRegular      = errors.New("not a regular file")
	ErrOutside         = errors.New("leads outside the root")
	ErrUnreadable      = errors.New("cannot be read")
	ErrChanged         = errors.New("the file changed")
	ErrTooLarge        = errors.New("larger than the limit")
	ErrDigestMismatch  = errors.New("the bytes do not match the digest")
	ErrTargetExists    = errors.New("the target exists")
)

// Error is a failure of one kind (a sentinel above) with the sentence that says what was wrong.
type Error = kinderr.Error

func fail(kind error, format string, args ...any) error { return kinderr.New(kind, format, args...) }

// wire is the one table from failures to the reason a door or a record names and the door's HTTP status.
var wire = []struct {
	err    error
	reason string
	status int
}{
	{ErrUnauthenticated, "unauthenticated", http.StatusUnauthorized},
	{ErrForbidden, "forbidden", http.StatusForbidden},
	{ErrMalformed, "malformed", http.StatusBadRequest},
	{ErrWrongFormation, "wrong_formation", http.StatusForbidden},
	{ErrWrongMember, "wrong_member", http.StatusNotFound},
	{ErrUnknownMember, "unknown_member", http.StatusNotFound},
	{ErrForged, "forged", http.StatusForbidden},
	{ErrExpired, "expired", http.StatusGone},
	{ErrNotExported, "not_exported", http.StatusNotFound},
	{ErrBadPath, "bad_path", http.StatusBadRequest},
	{ErrNotFound, "not_found", http.StatusNotFound},
	{ErrChanged, "changed", http.StatusConflict},
	{ErrNotRegular, "not_regular", http.StatusConflict},
	{ErrOutside, "outside", http.StatusConflict},
	{ErrUnreadable, "unreadable", http.StatusInternalServerError},
	{ErrTooLarge, "too_large", http.StatusRequestEntityTooLarge},
	{ErrDigestMismatch, "digest_mismatch", http.StatusBadGateway},
	{ErrTargetExists, "target_exists", http.StatusConflict},
}

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
