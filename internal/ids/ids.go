package ids

import (
	"encoding/hex"
	"strings"

	"github.com/oklog/ulid/v2"
)

// The id prefixes of DESIGN §6.
const (
	PrefixSession = "ses_"
	PrefixTask    = "tsk_"
	PrefixMessage = "msg_"
	PrefixContext = "ctx_"
)

// New returns prefix followed by a fresh lowercase ULID. ulid.Make is safe for concurrent use and
// monotonic within a millisecond, so ids sort by creation.
func New(prefix string) string { return prefix + strings.ToLower(ulid.Make().String()) }

// NewWorkID returns a work id: "wrk_" and the ULID's 16 bytes in hex (DESIGN §6).
func NewWorkID() string {
	id := ulid.Make()
	return "wrk_" + hex.EncodeToString(id[:])
}
