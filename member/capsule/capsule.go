package capsule

import (
	"path/filepath"
	"time"

	"github.com/murmur-run/murmur/roster"
)

// File is the name of a capsule's configuration inside its directory.
const File = "murmur.yaml"

// DefaultQueueSize is the bound of the task queue of a capsule with task_acceptance: queue that sets no
// queue_size.
const DefaultQueueSize = 16

// The values murmur.yaml's enumerated keys take.
const (
	TransportHTTP    = "http"
	TransportProcess = "process"

	ToolRefreshEveryTurn = "every_turn"
	ToolRefreshOnChange  = "on_change"

	DriverScript    = "script"
	DriverOpenAI    = "openai"
	DriverAnthropic = "anthropic"
)

// Acceptance is task_acceptance: what a busy member does with a new task.
type Acceptance string

// The values of task_acceptance.
const (
	AcceptReject Acceptance = "reject"
	AcceptQueue  Acceptance = "queue"
)

// AfterTaskMode is after_task: what a member does once its queue is empty.
type AfterTaskMode string

// The values of answers:.
const (
	AnswersTask    = "task"
	AnswersMessage = "message"
)

// AfterTaskSleep is after_task: sleep, the one value.
const AfterTaskSleep AfterTaskMode = "sleep"

// Capsule is a parsed and validated murmur.yaml (DESIGN §4.2). Defaults are filled in: Transport is
// "http", TaskAcceptance "reject", QueueSize DefaultQueueSize under "queue".
type Capsule struct {
	Dir  string // absolute capsule directory
	Path string // absolute path of its murmur.yaml

	Name         string
	Description  string
	Instructions string

	Inference *Inference  // nil: a script capsule
	Script    *ScriptSpec // set exactly when Inference is nil

	Transport      string
	Harness        *Harness // set exactly under transport: process
	Capabilities   Capabilities
	Exports        Exports
	Control        Control
	Push           Push
	Lifecycle      Lifecycle
	Deadline       time.Duration // the session's own deadline; 0 = none
	TaskAcceptance Acceptance
	QueueSize      int           // bound of the FIFO of waiting tasks under task_acceptance: queue
	AfterTask      AfterTaskMode // "" or "sleep"
	// Answers is answers: AnswersMessage answers a one-turn task with a Message instead of a Task
	// (DESIGN §15); "" (or AnswersTask) keeps the Task.
	Answers string
	Tools   []string
	Skills  []string
	Hooks   []string // policy hooks, scope/name[@version] (DESIGN §10)
	// Store is the store: block: how this member's task store keeps ended tasks. A field it does not set
	// comes from the roster's store: block, then from roster.DefaultRetention.
	Store roster.StoreSettings

	lines map[string]int
}

// AnswersWithMessage reports whether the capsule says answers: message.
func (c *Capsule) AnswersWithMessage() bool { return c.Answers == AnswersMessage }

// IsAgent reports whether the capsule is an agent capsule (it has an inference: block).
func (c *Capsule) IsAgent() bool { return c.Inference != nil }

// RunsCommands reports whether the capsule runs programs: a script capsule's command, shell binaries, a
// done_check.
func (c *Capsule) RunsCommands() bool {
	return !c.IsAgent() || len(c.Capabilities.Shell.Allow) > 0 || c.Lifecycle.DoneCheck != nil || c.Harness != nil
}

// Line returns the line of murmur.yaml that writes key, a dotted path such as "inference.driver",
// "inference.choices.gpt" or "tools[1]" for a list entry; 0 when the file does not write it. Staging uses
// it to point its own findings at the line to change.
func (c *Capsule) Line(key string) int { return c.lines[key] }

// Budget is the context budget of a choice with a context window, and what it is based on (SPEC's
// session-status context fields): max_input_tokens when it is set and smaller, else the window less the
// output cap. A choice without a window has none (0, "").
func (ch Choice) Budget() (tokens int, basis string) {
	if ch.ContextWindow <= 0 {
		return 0, ""
	}
	tokens, basis = ch.ContextWindow-ch.MaxOutputTokens, "context_window_less_output_cap"
	if ch.MaxInputTokens > 0 && ch.MaxInputTokens < tokens {
		tokens, basis = ch.MaxInputTokens, "max_input_tokens"
	}
	return tokens, basis
}

// NoticeMargin is how long before the deadline the deadline notice is given (SPEC "The deadline
// notice"): lifecycle.deadline_notice_secs, or five minutes or a tenth of the deadline, whichever is
// shorter, at least a second. Zero sends none.
func (c *Capsule) NoticeMargin() time.Duration {
	if n := c.Lifecycle.DeadlineNoticeSecs; n != nil {
		return time.Duration(*n) * time.Second
	}
	return max(min(5*time.Minute, c.Deadline/10), time.Second)
}

// Inference is the inference: block of an agent capsule.
type Inference struct {
	Driver           string // the choice the session starts on; a key of Choices
	Choices          map[string]Choice
	ChoiceOrder      []string // the keys of Choices in the order murmur.yaml declares them
	MaxTurns         int      // 0: no cap
	MaxSessionTokens int64    // 0: no ceiling
	Compaction       Compaction
	ToolRefresh      string // "", "every_turn" or "on_change"
}

// Compaction configures when the conversation is compacted.
type Compaction struct {
	Threshold float64 // fraction of the context budget, 0 < t <= 1; 0 = not set
}

// Harness is the harness: block of a capsule under transport: process (DESIGN §13): the external agent
// harness the runtime runs per task instead of its own agent loop.
type Harness struct {
	Command []string // the harness and its arguments; {prompt}, {session}, {mcp_config} are replaced
	Resume  []string // added after Command to resume the harness's own session
	Dialect string   // one of HarnessDialects
	Env     []string // NAME (mur's own value passed on) or NAME=value
	Read    []string // absolute paths the harness may read besides its workdir and the system directories
	Network bool     // default true: the harness must reach its model's API
}

// Choice is one named driver choice under inference.choices.
type Choice struct {
	Driver     string // "script", "openai" or "anthropic"
	Model      string
	BaseURL    string
	Credential string // "env:NAME" or "file:PATH"
	// Script is the script.yaml of a script driver, relative to the capsule directory; empty means the
	// embedded default.
	Script          string
	ContextWindow   int
	MaxOutputTokens int
	MaxInputTokens  int
}

// ScriptSpec is the script: block of a script capsule.
type ScriptSpec struct {
	Command     []string
	TimeoutSecs int
}

// AllowList is a capability granted for the names it lists.
type AllowList struct {
	Allow []string
}

// ShellGrant is capabilities.shell: the binaries a capsule may run, and the limits each run gets.
type ShellGrant struct {
	AllowList         // bare program names
	Confine     *bool // confine: false turns the write confinement off (default on)
	TimeoutSecs int   // timeout_secs: the time limit of one command (default 60)
	MemoryMB    int   // memory_mb: the address-space limit of one command (default 1024)
	OutputKB    int   // output_kb: bytes of output shown to the model, the last ones (default 16)
	// Read is read: more paths a command may read and execute, absolute (relative ones are resolved
	// against the capsule directory when the file is parsed); each existed then.
	Read []string
	// Network is network: true, which leaves a command the host's network; by default it has none.
	Network bool
}

// Capabilities is the capabilities: block.
type Capabilities struct {
	Shell     ShellGrant
	Spawn     AllowList // sub-capsules delegate-task may hand tasks to
	Plan      Plan
	PeerFetch bool
	// PeerFetchMaxMB is capabilities.peer_fetch.max_mb: the largest file fetch-peer-file stores, in MiB;
	// 0 means the default (64).
	PeerFetchMaxMB int
	Network        AllowList // hosts the member may reach
	Install        Install
	Hooks          HookGrant
}

// HookGrant is capabilities.hooks: what the capsule's hooks may ask of the session (DESIGN §18).
type HookGrant struct {
	// Inference is capabilities.hooks.inference: a WIT level 2 hook may make run_inference calls.
	Inference bool
}

// Plan grants submit-plan.
type Plan struct {
	Submit bool
}

// Install grants pull-artifact and remove-artifact for the patterns it lists.
type Install struct {
	Tool  []string
	Skill []string
	From  []string
}

// Exports is the exports: block.
type Exports struct {
	PeerFiles string // export root, relative to the workdir; "" = nothing exported
	// PeerFilesTTL is exports.peer_files.ttl: how long a handle share-file mints works; 0 means the
	// default (1h).
	PeerFilesTTL time.Duration
}

// Control is the control: block.
type Control struct {
	AgentSettings []string
	Tokens        []ControlToken // control.tokens: the control surface's tokens (capsule_door.go)
}

// Lifecycle is the lifecycle: block. A nil pointer is a key the file does not set.
type Lifecycle struct {
	ShellGraceSecs         *int
	DeadlineNoticeSecs     *int
	DelegationDeadlineSecs *int
	MaxTaskReopens         *int
	InputWaitSecs          *int // how long a task waits for its sender's input; nil: converse.DefaultInputWait
	KeepWorking            *KeepWorking
	DoneCheck              *DoneCheck
}

// KeepWorking is lifecycle.keep_working.
type KeepWorking struct {
	Limit int
}

// DoneCheck is lifecycle.done_check.
type DoneCheck struct {
	Command []string
	Limit   int
}

// ResolvePath resolves a script driver's script: against the capsule directory.
func ResolvePath(dir, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(dir, name)
}
