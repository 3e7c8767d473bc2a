package server

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/murmur-run/murmur/a2a"
)

// DefaultMaxStreams is how many streams (SendStreamingMessage, SubscribeToTask) one caller may hold open
// on a door at once: twice the 64 the console follows per door, so a console at its own limit leaves the
// operator as many again.
const DefaultMaxStreams = 128

// errTooManyStreams is the answer to a stream past its caller's limit: JSON-RPC's server error, with the
// reason, the limit and the count open in its ErrorInfo.
var errTooManyStreams = &a2a.Error{Code: a2a.CodeServerError, Message: "Too many open streams", Reason: "TOO_MANY_STREAMS"}

// streamCap bounds the streams each caller holds open on a door. A stream holds its memory and a file
// descriptor for as long as its client keeps it, so without a bound one caller could take them all. The
// operator and each peer member (by the name its credential carries, whatever its trust class) count
// apart: one at its limit refuses nobody else, and the door serves at most (peers + 1) × limit streams.
type streamCap struct {
	limit int

	mu   sync.Mutex // guards open
	open map[streamHolder]int
}

// streamHolder is whose streams are counted together.
type streamHolder struct {
	principal Principal
	member    string // a peer's member name
}

func newStreamCap(limit int) *streamCap {
	if limit <= 0 {
		limit = DefaultMaxStreams
	}
	return &streamCap{limit: limit, open: map[streamHolder]int{}}
}

// take counts one more open stream of caller's, or refuses it when caller holds the limit already. The
// release it returns gives the place back; it may be called more than once.
func (c *streamCap) take(caller Caller) (release func(), err error) {
	h := streamHolder{principal: caller.Principal, member: caller.Member}
	c.mu.Lock()
	n := c.open[h]
	if n >= c.limit {
		c.mu.Unlock()
		who := "the operator"
		if caller.Principal == Peer {
			who = "member " + caller.Member
		}
		return nil, errTooManyStreams.WithMeta("limit", strconv.Itoa(c.limit)).WithMeta("open", strconv.Itoa(n)).
			WithMeta("principal", h.String()).With(fmt.Sprintf(
			"too many open streams: %s holds %d streams open on this door, as many as one caller may (the door's --max-streams); close one of them (end a SendStreamingMessage or SubscribeToTask you no longer read), or poll the task with GetTask instead of streaming it",
			who, n))
	}
	c.open[h] = n + 1
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.open[h]--; c.open[h] == 0 {
				delete(c.open, h)
			}
			c.mu.Unlock()
		})
	}, nil
}

// String names the holder as the error's metadata does: "operator", or "peer:<member>".
func (h streamHolder) String() string {
	if h.principal == Peer {
		return "peer:" + h.member
	}
	return h.principal.String()
}
