package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// cardMaxAge is how long clients may cache the agent card.
const cardMaxAge = "public, max-age=300"

// cardBody is the agent card, marshalled once, with its ETag and the time the door built it
// (Last-Modified: a card changes only when its member restarts).
type cardBody struct {
	body     []byte
	etag     string
	modified time.Time
}

func newCardBody(card a2a.AgentCard, now time.Time) (cardBody, error) {
	b, err := json.Marshal(card)
	if err != nil {
		return cardBody{}, err
	}
	sum := sha256.Sum256(b)
	return cardBody{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, modified: now.UTC().Truncate(time.Second)}, nil
}

func (d *Door) serveCard(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", cardMaxAge)
	h.Set("ETag", d.card.etag)
	h.Set("Last-Modified", d.card.modified.Format(http.TimeFormat))
	// If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if inm == d.card.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	} else if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !d.card.modified.After(ims) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(d.card.body)
}

// NewCard returns the agent card of a member whose door is reached at baseURL. It declares the bearer
// scheme every request needs and lists no securityRequirements, so that every A2A 1.0 client reads it,
// a2a-go v2.3.1's included; a2a-go's AuthInterceptor attaches credentials only for listed requirements,
// so a Go client sends the token from its HTTP client (a RoundTripper setting Authorization, passed with
// a2aclient.WithJSONRPCTransport).
func NewCard(name, description, version, baseURL, formation string) a2a.AgentCard {
	if description == "" {
		description = "murmur member " + name + " of formation " + formation
	}
	return a2a.AgentCard{
		Name:        name,
		Description: description,
		Version:     version,
		SupportedInterfaces: []a2a.AgentInterface{{
			URL: baseURL + "/a2a", ProtocolBinding: a2a.BindingJSONRPC, ProtocolVersion: a2a.ProtocolVersion,
		}},
		Capabilities:       a2a.AgentCapabilities{},
		DefaultInputModes:  []string{InputMode},
		DefaultOutputModes: []string{OutputMode},
		Skills: []a2a.AgentSkill{{
			ID: name, Name: name, Description: description, Tags: []string{"murmur", formation},
		}},
		SecuritySchemes: map[string]a2a.SecurityScheme{
			"bearer": {HTTPAuth: &a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}},
		},
		// No securityRequirements: A2A's form, {"schemes": {"bearer": {"list": []}}}, stops a2a-go v2.3.1's
		// agentcard.Resolver (it reads a bare array, a2aproject/a2a-go#430), and the form it reads is not
		// valid ProtoJSON. The field is optional; the declared scheme says how to authenticate.
	}
}
