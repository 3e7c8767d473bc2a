package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/murmur-run/murmur/a2a"
)

// cardMaxAge is how long clients may cache the agent card.
const cardMaxAge = "public, max-age=300"

// cardBody is the agent card, marshalled once, with its ETag.
type cardBody struct {
	body []byte
	etag string
}

func newCardBody(card a2a.AgentCard) (cardBody, error) {
	b, err := json.Marshal(card)
	if err != nil {
		return cardBody{}, err
	}
	sum := sha256.Sum256(b)
	return cardBody{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}, nil
}

func (d *Door) serveCard(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", cardMaxAge)
	h.Set("ETag", d.card.etag)
	if r.Header.Get("If-None-Match") == d.card.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(d.card.body)
}

// NewCard returns the agent card of a member whose door is reached at baseURL.
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
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: name, Name: name, Description: description, Tags: []string{"murmur", formation},
		}},
		SecuritySchemes: map[string]a2a.SecurityScheme{
			"bearer": {HTTPAuth: &a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}},
		},
		SecurityRequirements: []a2a.SecurityRequirement{{Schemes: map[string]a2a.StringList{"bearer": {List: []string{}}}}},
	}
}
