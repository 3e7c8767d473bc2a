package ids

// The keys of metadata.murmur that join a task to its trace and report what it cost (DESIGN §17).
const (
	// MetaUsage is the task's tokens, its own and those of the tasks and sub-sessions it caused
	// (member/usage).
	MetaUsage MetaKey = "usage"
	// MetaTraceID is the trace the task ran in (hex), when its run was a recorded span.
	MetaTraceID MetaKey = "trace_id"
)
