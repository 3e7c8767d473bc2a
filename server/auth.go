package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/peercred"
)

// Tokens are a formation's two secrets: the operator's bearer token, and the formation token, from which
// each member derives the credential it presents to the others (package peercred). No model and no
// command ever sees either.
type Tokens struct {
	Operator  string
	Formation string
}

// Principal is the kind of party a request authenticated as.
type Principal int

// The principals of a door.
const (
	Nobody Principal = iota
	Operator
	Peer
)

func (p Principal) String() string {
	switch p {
	case Operator:
		return "operator"
	case Peer:
		return "peer"
	}
	return "nobody"
}

// Caller is who a request authenticated as: the operator, or a peer with the member name and trust
// class its credential carries (never what the request's metadata says).
type Caller struct {
	Principal Principal
	Member    string    // a peer's member name
	Trust     ids.Trust // a peer's trust class: peercred.Trusted or peercred.Untrusted
}

// authenticator checks a request's bearer token: the operator token, or a peer credential derived from
// the formation secret (package peercred). The formation secret itself authenticates nobody.
type authenticator struct {
	operator []byte
	secret   []byte
	key      peercred.Key
}

func newAuthenticator(t Tokens, formation string) authenticator {
	return authenticator{operator: []byte(t.Operator), secret: []byte(t.Formation), key: peercred.NewKey(t.Formation, formation)}
}

// errNoToken and errBareSecret are why a request authenticated as nobody, in the words sent back.
const (
	errNoToken    = "missing or invalid bearer token: send Authorization: Bearer <operator token>"
	errBareSecret = "the formation token is not a bearer credential: a member presents a credential derived from it (its name and trust class, signed); send the operator token to act as the operator"
)

// authenticate reads the Authorization header only, so it runs before anything else of the request is
// read. On Nobody it returns the reason to send.
func (a authenticator) authenticate(r *http.Request) (Caller, string) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return Caller{}, errNoToken
	}
	got := strings.TrimSpace(h[len(prefix):])
	if len(a.operator) > 0 && subtle.ConstantTimeCompare([]byte(got), a.operator) == 1 {
		return Caller{Principal: Operator}, ""
	}
	if peercred.LooksLike(got) {
		id, err := a.key.Verify(got)
		if err != nil {
			return Caller{}, errNoToken
		}
		return Caller{Principal: Peer, Member: id.Member, Trust: id.Trust}, ""
	}
	if len(a.secret) > 0 && subtle.ConstantTimeCompare([]byte(got), a.secret) == 1 {
		return Caller{}, errBareSecret
	}
	return Caller{}, errNoToken
}

// Token file names under the data directory.
const (
	OperatorTokenFile  = "operator.token"
	FormationTokenFile = "formation.token"
)

// LoadTokens returns the tokens a formation runs with: MUR_OPERATOR_TOKEN and MUR_FORMATION_TOKEN when
// set, otherwise the ones in dir, otherwise fresh random ones, written to dir with mode 0600.
func LoadTokens(dir string, getenv func(string) string) (Tokens, error) {
	var t Tokens
	var err error
	if t.Operator, err = loadToken(dir, OperatorTokenFile, getenv("MUR_OPERATOR_TOKEN")); err != nil {
		return Tokens{}, err
	}
	if t.Formation, err = loadToken(dir, FormationTokenFile, getenv("MUR_FORMATION_TOKEN")); err != nil {
		return Tokens{}, err
	}
	if t.Operator == t.Formation {
		return Tokens{}, errors.New("the operator token and the formation token are the same; give them different values")
	}
	return t, nil
}

func loadToken(dir, name, fromEnv string) (string, error) {
	if v := strings.TrimSpace(fromEnv); v != "" {
		return v, nil
	}
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil {
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading token: %w", err)
	}
	tok := NewToken()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("token directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	return tok, nil
}

// NewToken returns a fresh random bearer token: "mur_" and 64 hex digits.
func NewToken() string {
	buf := make([]byte, 32)
	rand.Read(buf)
	return "mur_" + hex.EncodeToString(buf)
}
