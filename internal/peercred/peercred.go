// Package peercred derives and checks the bearer credentials members of a formation present to each
// other's doors.
//
// Every member holds the formation secret (the formation token), but never sends it: it presents a
// credential of its own, derived from the secret, its name and the trust class of the task it acts for:
//
//	murp1.<member>.<trust>.<mac>
//
// where mac is base64url (no padding) of HMAC-SHA256 over "<member>\x00<trust>", keyed by HKDF-SHA256 of
// the secret with the formation's name in its info. A door that holds the same secret recomputes the
// mac for the name and class the credential states and compares in constant time, so it learns who is
// calling, and for which trust class, from the credential alone: no table of credentials is shared, and
// a request's metadata cannot change either. Rotating the formation secret rotates every credential.
//
// The package is pure: no I/O, no state. Its functions are safe for concurrent use.
package peercred

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
)

// The trust classes a credential may carry (DESIGN §2): those of ids, which tasks carry.
const (
	Trusted   = ids.TrustTrusted
	Untrusted = ids.TrustUntrusted
)

// prefix starts every credential; the version is in it so a later scheme can be told apart.
const prefix = "murp1."

// Identity is what a valid credential says: the calling member and the trust class of its task.
type Identity struct {
	Member string
	Trust  ids.Trust
}

// ErrMalformed is the error of a string that is not shaped like a credential; ErrForged is the error of
// one whose mac does not match. Callers answer both the same way (unauthenticated).
var (
	ErrMalformed = errors.New("peercred: not a peer credential")
	ErrForged    = errors.New("peercred: the credential's signature does not match")
)

// Key is the per-formation key credentials are signed with.
type Key [sha256.Size]byte

// NewKey derives the credential key of a formation from its secret. An empty secret gives the zero key,
// which Verify never accepts.
func NewKey(secret, formation string) Key {
	var k Key
	if secret == "" {
		return k
	}
	b, err := hkdf.Key(sha256.New, []byte(secret), nil, "murmur peer credential v1\x00"+formation, sha256.Size)
	if err != nil {
		panic("peercred: HKDF of 32 bytes cannot fail: " + err.Error())
	}
	copy(k[:], b)
	return k
}

// Credential returns the credential member presents for a task of the given trust class.
func (k Key) Credential(member string, trust ids.Trust) string {
	return prefix + member + "." + string(trust) + "." + base64.RawURLEncoding.EncodeToString(k.mac(member, trust))
}

// Verify checks a presented credential and returns the identity it carries.
func (k Key) Verify(cred string) (Identity, error) {
	if k == (Key{}) {
		return Identity{}, ErrForged
	}
	rest, ok := strings.CutPrefix(cred, prefix)
	if !ok {
		return Identity{}, ErrMalformed
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !validName(parts[0]) {
		return Identity{}, ErrMalformed
	}
	trust := ids.Trust(parts[1])
	if trust != Trusted && trust != Untrusted {
		return Identity{}, ErrMalformed
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(got) != sha256.Size {
		return Identity{}, ErrMalformed
	}
	if !hmac.Equal(got, k.mac(parts[0], trust)) {
		return Identity{}, ErrForged
	}
	return Identity{Member: parts[0], Trust: trust}, nil
}

// LooksLike reports whether a bearer token has the form of a peer credential (not whether it is valid).
func LooksLike(token string) bool { return strings.HasPrefix(token, prefix) }

// Contains reports whether s holds, anywhere in it, a string of a credential's whole form: the prefix, a
// member name, a trust class and a mac of the right length. It knows no key, so it finds the credentials
// of every formation, valid or not; it is for filters that keep credentials out of what a program is
// handed (an environment), where one of another formation is as unwelcome.
func Contains(s string) bool {
	for {
		i := strings.Index(s, prefix)
		if i < 0 {
			return false
		}
		s = s[i+len(prefix):]
		if credentialRest(s) {
			return true
		}
	}
}

// credentialRest reports whether s starts with what follows a credential's prefix: <member>.<trust>.<mac>.
func credentialRest(s string) bool {
	name, rest, ok := strings.Cut(s, ".")
	if !ok || !validName(name) {
		return false
	}
	class, mac, ok := strings.Cut(rest, ".")
	if trust := ids.Trust(class); !ok || (trust != Trusted && trust != Untrusted) {
		return false
	}
	n := base64.RawURLEncoding.EncodedLen(sha256.Size)
	if len(mac) < n {
		return false
	}
	for i := range n {
		c := mac[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (k Key) mac(member string, trust ids.Trust) []byte {
	h := hmac.New(sha256.New, k[:])
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(trust))
	return h.Sum(nil)
}

// validName is roster.yaml's member name rule, [a-z][a-z0-9-]*.
func validName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
