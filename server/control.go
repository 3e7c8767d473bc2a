package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/capsule"
)

// ControlToken is one token of the control surface and the id records name it by.
type ControlToken struct {
	ID    string
	Token string
}

// Controller is what the control surface needs of a member's session.
type Controller interface {
	Control(setting, value, tokenID string) (member.ControlChange, error)
}

var _ Controller = (*member.Session)(nil)

// EnvControlTokenID is the token_id of the token MUR_CONTROL_TOKEN gives.
const EnvControlTokenID = "MUR_CONTROL_TOKEN"

// LoadControlTokens returns a member's control tokens: fromEnv (MUR_CONTROL_TOKEN) when set, and one per
// entry of the capsule's control.tokens, read from its token_file. A file that cannot be read or is
// empty is an error naming it.
func LoadControlTokens(c *capsule.Capsule, fromEnv string) ([]ControlToken, error) {
	var out []ControlToken
	if v := strings.TrimSpace(fromEnv); v != "" {
		out = append(out, ControlToken{ID: EnvControlTokenID, Token: v})
	}
	for _, t := range c.Control.Tokens {
		b, err := os.ReadFile(t.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("control.tokens %s: %w (write the token to that file, or remove the entry)", t.ID, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return nil, fmt.Errorf("control.tokens %s: %s is empty: write the token to it", t.ID, t.TokenFile)
		}
		out = append(out, ControlToken{ID: t.ID, Token: v})
	}
	return out, nil
}

// controlRequest is the body of POST /control.
type controlRequest struct {
	Setting *string `json:"setting"`
	Value   *string `json:"value"`
}

// serveControl is POST /control (DESIGN §14): a control token changes a setting listed in
// control.agent_settings for the next inference call. No other token opens it. Answers are JSON:
// 200 with the change, 400 for a body that is not a change, 401 without a control token, 404 when the
// member has no control token at all, 409 for a change the member refuses (and records).
func (d *Door) serveControl(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="murmur control"`)
		}
		writeJSON(w, status, map[string]string{"error": msg})
	}
	if len(d.cfg.ControlTokens) == 0 || d.cfg.Control == nil {
		d.pacer.pace(r.Context())
		fail(http.StatusNotFound, "this member has no control surface: start it with MUR_CONTROL_TOKEN set, or list control.tokens in its murmur.yaml")
		return
	}
	id, ok := d.controlToken(r)
	if !ok {
		d.pacer.pace(r.Context())
		fail(http.StatusUnauthorized, "missing or invalid control token: send Authorization: Bearer <control token> (MUR_CONTROL_TOKEN or a control.tokens entry); the operator and formation tokens do not open the control surface")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		fail(http.StatusBadRequest, "reading the body failed: "+err.Error())
		return
	}
	var req controlRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Setting == nil || req.Value == nil {
		fail(http.StatusBadRequest, `the body must be {"setting": "inference.driver", "value": "<choice>"}`)
		return
	}
	change, err := d.cfg.Control.Control(*req.Setting, *req.Value, id)
	switch {
	case errors.Is(err, member.ErrControlRefused):
		fail(http.StatusConflict, strings.TrimPrefix(err.Error(), member.ErrControlRefused.Error()+": "))
		return
	case err != nil:
		d.cfg.Logger.Error("control change", "err", err)
		fail(http.StatusInternalServerError, "the change was made but its record could not be written")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"setting": change.Setting, "previous": change.Previous,
		"value": change.Value, "applies": "from the next inference call"})
}

// controlToken returns the id of the control token r carries.
func (d *Door) controlToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	got := []byte(strings.TrimSpace(h[len(prefix):]))
	id, found := "", false
	for _, t := range d.cfg.ControlTokens {
		if subtle.ConstantTimeCompare(got, []byte(t.Token)) == 1 && !found {
			id, found = t.ID, true
		}
	}
	return id, found
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a client gone: no one is left to tell
}
