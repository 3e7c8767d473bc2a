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
)

// Tokens are a formation's two bearer credentials: the operator's, and the formation's own, which its
// members present to each other and no model ever sees.
type Tokens struct {
	Operator  string
	Formation string
}

// Principal is who a request authenticated as.
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

// Authenticate compares the request's bearer token with both tokens in constant time.
func (t Tokens) Authenticate(r *http.Request) Principal {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return Nobody
	}
	got := []byte(strings.TrimSpace(h[len(prefix):]))
	op := subtle.ConstantTimeCompare(got, []byte(t.Operator))
	peer := subtle.ConstantTimeCompare(got, []byte(t.Formation))
	switch {
	case t.Operator != "" && op == 1:
		return Operator
	case t.Formation != "" && peer == 1:
		return Peer
	}
	return Nobody
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
