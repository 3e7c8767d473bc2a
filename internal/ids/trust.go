package ids

// Trust is a task's trust class (DESIGN §2): metadata.murmur.trust, and the class a peer credential
// carries (internal/peercred).
type Trust string

// The trust classes.
const (
	TrustTrusted   Trust = "trusted"
	TrustUntrusted Trust = "untrusted"
)

// Origin says who sent a task: metadata.murmur.origin.
type Origin string

// The origins of a task.
const (
	OriginOperator   Origin = "operator"   // the operator, through the door
	OriginPeer       Origin = "peer"       // another formation member, with its credential
	OriginCompletion Origin = "completion" // the session itself: a background command's completion notice
	OriginDelegation Origin = "delegation" // a sub-session's task, which its parent's delegate-task handed over
)

// TrustOf returns metadata.murmur.trust of m, "" when it holds none. Metadata read back from JSON holds
// the class as a string; a map the session built holds it as either.
func TrustOf(m map[string]any) Trust {
	switch v := m[string(MetaTrust)].(type) {
	case Trust:
		return v
	case string:
		return Trust(v)
	}
	return ""
}

// OriginOf returns metadata.murmur.origin of m, "" when it holds none, as TrustOf does the trust class.
func OriginOf(m map[string]any) Origin {
	switch v := m[string(MetaOrigin)].(type) {
	case Origin:
		return v
	case string:
		return Origin(v)
	}
	return ""
}
