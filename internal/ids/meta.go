package ids

// Meta is murmur's key in an A2A task's or message's metadata: metadata.murmur holds a map keyed by
// MetaKey.
const Meta = "murmur"

// MetaKey is a key of metadata.murmur.
type MetaKey string

// The keys of metadata.murmur.
const (
	MetaMember          MetaKey = "member"          // the member whose task it is
	MetaTrust           MetaKey = "trust"           // the trust class of the caller's credential
	MetaOrigin          MetaKey = "origin"          // operator or peer
	MetaCaller          MetaKey = "caller"          // the calling member, for a peer's task
	MetaCallID          MetaKey = "call_id"         // call-member's call id
	MetaCallerTaskID    MetaKey = "caller_task_id"  // the calling member's task
	MetaNoAnswer        MetaKey = "noAnswer"        // the task ended without an answer
	MetaNoAnswerBelow   MetaKey = "noAnswerBelow"   // the members below that ended without an answer
	MetaRunningCommands MetaKey = "runningCommands" // background commands still running at the task's end
	MetaOneTurn         MetaKey = "oneTurn"         // the task completed in one turn without tools (answers: message)
	MetaBusy            MetaKey = "busy"            // true: the task was rejected because the member had no room for it
)

// Murmur returns metadata.murmur of md, nil when there is none.
func Murmur(md map[string]any) map[string]any {
	m, _ := md[Meta].(map[string]any)
	return m
}

// NewMeta returns a metadata.murmur map holding kv.
func NewMeta(kv map[MetaKey]any) map[string]any {
	m := make(map[string]any, len(kv))
	for k, v := range kv {
		m[string(k)] = v
	}
	return m
}

// Get returns the value of key in metadata.murmur m.
func Get(m map[string]any, key MetaKey) any { return m[string(key)] }

// Lookup returns the value of key in metadata.murmur m and whether it is there.
func Lookup(m map[string]any, key MetaKey) (any, bool) {
	v, ok := m[string(key)]
	return v, ok
}

// Set sets key in metadata.murmur m.
func Set(m map[string]any, key MetaKey, v any) { m[string(key)] = v }

// Setting is a setting control.agent_settings may hand the agent.
type Setting string

// SettingInferenceDriver lets the agent switch its inference choice (switch-driver).
const SettingInferenceDriver Setting = "inference.driver"
