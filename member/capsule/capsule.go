package capsule

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/yamldoc"
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

// Error is one thing wrong in a murmur.yaml, with the line to change and what to write instead.
type Error struct {
	File string
	Line int // 0 when the error concerns the whole file
	Msg  string
	Fix  string
}

func (e *Error) Error() string { return yamldoc.Format(e.File, e.Line, e.Msg, e.Fix) }

// Load reads and validates dir/murmur.yaml. dir may also name the murmur.yaml itself.
func Load(dir string) (*Capsule, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("capsule %s: %w", dir, err)
	}
	path := filepath.Join(abs, File)
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		path = abs
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{File: path, Msg: "no murmur.yaml in the capsule directory",
			Fix: "create it (with name: and inference: or script:), or point the roster's capsule: at the capsule's directory"}
	}
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot be read: " + err.Error(), Fix: "make the file readable"}
	}
	return Parse(path, data)
}

// Parse parses and validates data as the murmur.yaml at path. Paths the file names (a script
// driver's script.yaml) are resolved against the directory of path and must exist. Every problem is
// reported, joined with errors.Join, each a *Error, in line order.
func Parse(path string, data []byte) (*Capsule, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("capsule %s: %w", path, err)
	}
	d := &yamldoc.Doc{
		Lines: map[string]int{},
		Mk: func(line int, msg, fix string) error {
			return &Error{File: abs, Line: line, Msg: msg, Fix: fix}
		},
		Misplaced: capsuleMisplaced,
		WholeFix:  "write a whole number of 0 or more, such as %s: 10",
	}
	root := d.Root(data, "name: worker, then inference: or script:")
	if root == nil {
		return nil, d.Err()
	}
	c := &Capsule{Dir: filepath.Dir(abs), Path: abs, lines: d.Lines}
	p := &capsuleParser{d: d, c: c}
	p.top(root)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// capsuleMisplaced names the block a key belongs to when it is written at the top level instead.
var capsuleMisplaced = map[string]string{
	"driver": "inference", "choices": "inference", "max_turns": "inference", "max_session_tokens": "inference",
	"compaction": "inference", "tool_refresh": "inference",
	"command": "script", "timeout_secs": "script",
	"shell": "capabilities", "spawn": "capabilities", "plan": "capabilities", "peer_fetch": "capabilities",
	"network": "capabilities", "install": "capabilities",
	"peer_files":       "exports",
	"agent_settings":   "control",
	"shell_grace_secs": "lifecycle", "deadline_notice_secs": "lifecycle", "delegation_deadline_secs": "lifecycle",
	"max_task_reopens": "lifecycle", "input_wait_secs": "lifecycle", "keep_working": "lifecycle", "done_check": "lifecycle",
	"retention": "store",
}

type capsuleParser struct {
	d *yamldoc.Doc
	c *Capsule
	// process: the file says transport: process, so inference: needs no driver choices (the harness
	// runs its own model).
	process bool
}

var (
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	choiceNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	artifactRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*(@[0-9A-Za-z][0-9A-Za-z.+_-]*)?$`)
	// ExampleModels names, per model driver, a model to show in examples and hints.
	ExampleModels = map[string]string{DriverOpenAI: "gpt-4.1-mini", DriverAnthropic: "claude-sonnet-4-5"}
)

func (p *capsuleParser) top(n *yaml.Node) {
	d, c := p.d, p.c
	var nameKey, infKey, scriptKey, queueKey, afterKey, acceptKey, harnessKey, transportKey *yaml.Node
	queueSet := false
	p.process = declaresProcess(n)
	d.Fields(n, "", []yamldoc.Field{
		{Name: "name", Fn: func(k, v *yaml.Node) {
			nameKey = k
			if s, ok := d.Text(v, "name"); ok {
				c.Name = s
				if strings.TrimSpace(s) == "" {
					d.Add(v.Line, "name is empty", "write the capsule's name, such as name: worker")
				}
			}
		}},
		{Name: "description", Fn: func(_, v *yaml.Node) { c.Description, _ = d.Text(v, "description") }},
		{Name: "instructions", Fn: func(_, v *yaml.Node) { c.Instructions, _ = d.Text(v, "instructions") }},
		{Name: "inference", Fn: func(k, v *yaml.Node) { infKey = k; c.Inference = p.inference(k, v) }},
		{Name: "script", Fn: func(k, v *yaml.Node) { scriptKey = k; c.Script = p.script(k, v) }},
		{Name: "transport", Fn: func(k, v *yaml.Node) {
			transportKey = k
			c.Transport, _ = d.Enum(v, "transport", TransportHTTP, TransportProcess)
		}},
		{Name: "harness", Fn: func(k, v *yaml.Node) { harnessKey = k; c.Harness = p.harness(v) }},
		{Name: "capabilities", Fn: func(_, v *yaml.Node) { p.capabilities(v) }},
		{Name: "exports", Fn: func(_, v *yaml.Node) { p.exports(v) }},
		{Name: "control", Fn: func(_, v *yaml.Node) {
			d.Fields(v, "control", []yamldoc.Field{{Name: "tokens", Fn: func(_, v *yaml.Node) { p.controlTokens(v) }}, {Name: "agent_settings", Fn: func(_, v *yaml.Node) {
				list, ok := d.Texts(v, "control.agent_settings")
				if !ok {
					return
				}
				c.Control.AgentSettings = list
				for i, s := range list {
					if s != string(ids.SettingInferenceDriver) {
						d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("control.agent_settings entry %q is not a setting the agent may change", s),
							"the settings are: "+string(ids.SettingInferenceDriver)+yamldoc.DidYouMean(s, []string{string(ids.SettingInferenceDriver)}))
					}
				}
			}}})
		}},
		{Name: "push", Fn: func(_, v *yaml.Node) { p.push(v) }},
		{Name: "lifecycle", Fn: func(_, v *yaml.Node) { p.lifecycle(v) }},
		{Name: "deadline", Fn: func(_, v *yaml.Node) {
			s, ok := d.Text(v, "deadline")
			if !ok {
				return
			}
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.Add(v.Line, fmt.Sprintf("deadline %q is not a duration", s),
					"write a number with a unit, such as deadline: 2h, deadline: 90m or deadline: 45s")
			case dur < 0:
				d.Add(v.Line, fmt.Sprintf("deadline %q is negative", s), "write a positive duration such as deadline: 2h, or remove the key for no deadline")
			default:
				c.Deadline = dur
			}
		}},
		{Name: "task_acceptance", Fn: func(k, v *yaml.Node) {
			acceptKey = k
			a, _ := d.Enum(v, "task_acceptance", string(AcceptReject), string(AcceptQueue))
			c.TaskAcceptance = Acceptance(a)
		}},
		{Name: "queue_size", Fn: func(k, v *yaml.Node) {
			queueKey = k
			if n, ok := d.CountInt(v, "queue_size"); ok {
				queueSet = true
				c.QueueSize = n
				if n == 0 {
					d.Add(v.Line, "queue_size is 0, so no task could ever wait", "write at least 1, such as queue_size: 16, or remove the key for the default of 16")
				}
			}
		}},
		{Name: "answers", Fn: func(_, v *yaml.Node) { c.Answers, _ = d.Enum(v, "answers", AnswersTask, AnswersMessage) }},
		{Name: "after_task", Fn: func(k, v *yaml.Node) {
			afterKey = k
			a, _ := d.Enum(v, "after_task", string(AfterTaskSleep))
			c.AfterTask = AfterTaskMode(a)
		}},
		{Name: "tools", Fn: func(_, v *yaml.Node) { c.Tools = p.artifacts(v, "tools", "local/bash or local/bash@1.2.0") }},
		{Name: "skills", Fn: func(_, v *yaml.Node) { c.Skills = p.artifacts(v, "skills", "local/style or local/style@1.0.0") }},
		{Name: "hooks", Fn: func(_, v *yaml.Node) { c.Hooks = p.artifacts(v, "hooks", "local/policy or local/policy@1.0.0") }},
		{Name: "store", Fn: func(_, v *yaml.Node) { p.store(v) }},
	})

	// Cross-key checks and defaults.
	if nameKey == nil {
		d.Missing(n.Line, "name", "name is missing", "add the capsule's name, such as name: worker")
	}
	switch {
	case infKey != nil && scriptKey != nil:
		d.Add(scriptKey.Line, fmt.Sprintf("script: is for script capsules, but this capsule has inference: (line %d)", infKey.Line),
			"remove script: for an agent capsule, or remove inference: for a script capsule")
		c.Script = nil
	case infKey == nil && scriptKey == nil && !p.process:
		d.Add(n.Line, "the capsule has neither inference: nor script:",
			"add inference: for an agent capsule run by a model, or script: {command: [./answer.sh]} for a script capsule that runs a program per task")
	}
	if c.Transport == "" {
		c.Transport = TransportHTTP
	}
	p.processChecks(harnessKey, transportKey, scriptKey)
	if c.TaskAcceptance == "" {
		c.TaskAcceptance = AcceptReject
	}
	if c.TaskAcceptance != AcceptQueue {
		if queueSet {
			d.Add(queueKey.Line, "queue_size applies only with task_acceptance: queue",
				"add task_acceptance: queue, or remove queue_size")
		}
		if c.AfterTask == AfterTaskSleep {
			fix := "add task_acceptance: queue, or remove after_task"
			if acceptKey != nil {
				fix = fmt.Sprintf("set task_acceptance: queue (line %d), or remove after_task", acceptKey.Line)
			}
			d.Add(afterKey.Line, "after_task: sleep needs task_acceptance: queue", fix)
		}
	} else if !queueSet {
		c.QueueSize = DefaultQueueSize
	}
	if !c.IsAgent() && infKey == nil && slices.Contains(c.Control.AgentSettings, string(ids.SettingInferenceDriver)) {
		d.Add(d.Lines["control.agent_settings"], "control.agent_settings lists inference.driver, but a script capsule has no inference: block",
			"remove inference.driver from control.agent_settings, or make this an agent capsule")
	}
}

func (p *capsuleParser) inference(k, v *yaml.Node) *Inference {
	d := p.d
	inf := &Inference{Choices: map[string]Choice{}}
	var driverKey, driverVal, choicesKey *yaml.Node
	var declared []string
	ok := d.Fields(v, "inference", []yamldoc.Field{
		{Name: "driver", Fn: func(k, v *yaml.Node) {
			driverKey = k
			if s, ok := d.Text(v, "inference.driver"); ok {
				inf.Driver, driverVal = s, v
			}
		}},
		{Name: "choices", Fn: func(k, v *yaml.Node) {
			choicesKey = k
			if d.Walk(v, "inference.choices", func(k, v *yaml.Node) {
				name := k.Value
				declared = append(declared, name)
				if !choiceNameRE.MatchString(name) {
					d.Add(k.Line, fmt.Sprintf("driver choice name %q is not a plain name", name),
						"name it with letters, digits, '-', '_' or '.', such as local or gpt-mini")
					return
				}
				if ch, ok := p.choice(k, v, "inference.choices."+name); ok {
					inf.Choices[name] = ch
					inf.ChoiceOrder = append(inf.ChoiceOrder, name)
				}
			}) && len(declared) == 0 {
				d.Add(k.Line, "inference.choices declares no choice",
					"declare at least one, such as choices: {local: {driver: script}}")
			}
		}},
		{Name: "max_turns", Fn: func(_, v *yaml.Node) {
			inf.MaxTurns = d.CountOr0(v, "inference.max_turns")
		}},
		{Name: "max_session_tokens", Fn: func(_, v *yaml.Node) { inf.MaxSessionTokens, _ = d.Count(v, "inference.max_session_tokens") }},
		{Name: "compaction", Fn: func(k, v *yaml.Node) {
			set := false
			d.Fields(v, "inference.compaction", []yamldoc.Field{{Name: "threshold", Fn: func(_, v *yaml.Node) {
				set = true
				t, ok := d.Number(v, "inference.compaction.threshold")
				if !ok {
					return
				}
				if t <= 0 || t > 1 {
					d.Add(v.Line, fmt.Sprintf("inference.compaction.threshold must be more than 0 and at most 1, not %s", v.Value),
						"write the fraction of the context budget at which compaction fires, such as threshold: 0.8")
					return
				}
				inf.Compaction.Threshold = t
			}}})
			if !set && yamldoc.IsMapping(v) {
				d.Missing(k.Line, "inference.compaction.threshold", "inference.compaction has no threshold", "write compaction: {threshold: 0.8}, or remove compaction")
			}
		}},
		{Name: "tool_refresh", Fn: func(_, v *yaml.Node) {
			inf.ToolRefresh, _ = d.Enum(v, "inference.tool_refresh", ToolRefreshEveryTurn, ToolRefreshOnChange)
		}},
	})
	if !ok {
		return inf
	}
	if p.process {
		if choicesKey != nil {
			d.Add(choicesKey.Line, "inference.choices is for transport: http; under transport: process the harness runs its own model",
				"remove inference.driver and inference.choices, and configure the model in the harness's command")
		}
		return inf
	}
	if choicesKey == nil {
		d.Missing(k.Line, "inference.choices", "inference.choices is missing",
			"declare the driver choices, such as choices: {local: {driver: script}}")
	}
	switch {
	case driverKey == nil:
		fix := "name the choice the session starts on, such as driver: local"
		if len(declared) > 0 {
			fix = "name the choice the session starts on, such as driver: " + declared[0]
		}
		d.Missing(k.Line, "inference.driver", "inference.driver is missing", fix)
	case driverVal != nil && len(declared) > 0 && !slices.Contains(declared, inf.Driver):
		d.Add(driverVal.Line, fmt.Sprintf("inference.driver %q names no declared choice", inf.Driver),
			"declared choices: "+strings.Join(declared, ", ")+yamldoc.DidYouMean(inf.Driver, declared))
	}
	return inf
}

func (p *capsuleParser) choice(k, v *yaml.Node, path string) (Choice, bool) {
	d := p.d
	var ch Choice
	var scriptVal, driverVal *yaml.Node
	fix := "write driver: script, driver: openai or driver: anthropic"
	ok := d.Fields(v, path, []yamldoc.Field{
		{Name: "driver", Fn: func(_, v *yaml.Node) {
			driverVal = v
			ch.Driver, _ = d.Enum(v, path+".driver", DriverScript, DriverOpenAI, DriverAnthropic)
		}},
		{Name: "model", Fn: func(_, v *yaml.Node) { ch.Model, _ = d.Text(v, path+".model") }},
		{Name: "base_url", Fn: func(_, v *yaml.Node) {
			s, ok := d.Text(v, path+".base_url")
			if !ok {
				return
			}
			ch.BaseURL = s
			if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.Add(v.Line, fmt.Sprintf("%s.base_url %q is not an http or https URL", path, s),
					"write the API's base URL, such as base_url: http://127.0.0.1:11434/v1")
			}
		}},
		{Name: "credential", Fn: func(_, v *yaml.Node) {
			s, ok := d.Text(v, path+".credential")
			if !ok {
				return
			}
			ch.Credential = s
			// The value is never quoted back: a key written here by mistake must not reach a log.
			switch name, isEnv := strings.CutPrefix(s, "env:"); {
			case isEnv && envNameRE.MatchString(name):
			case isEnv:
				d.Add(v.Line, path+".credential names no valid environment variable after env:",
					"write credential: env:NAME with NAME made of letters, digits and '_', such as env:OPENAI_API_KEY")
			case strings.HasPrefix(s, "file:") && len(s) > len("file:"):
			default:
				d.Add(v.Line, path+".credential is neither env:NAME nor file:PATH",
					"write credential: env:OPENAI_API_KEY to read the key from the environment, or credential: file:/run/secrets/key to read it from a file; never write the key itself in murmur.yaml")
			}
		}},
		{Name: "script", Fn: func(_, v *yaml.Node) {
			if s, ok := d.Text(v, path+".script"); ok {
				ch.Script, scriptVal = s, v
			}
		}},
		{Name: "context_window", Fn: func(_, v *yaml.Node) { ch.ContextWindow = (d.CountOr0(v, path+".context_window")) }},
		{Name: "max_output_tokens", Fn: func(_, v *yaml.Node) { ch.MaxOutputTokens = (d.CountOr0(v, path+".max_output_tokens")) }},
		{Name: "max_input_tokens", Fn: func(_, v *yaml.Node) { ch.MaxInputTokens = (d.CountOr0(v, path+".max_input_tokens")) }},
	})
	if !ok {
		return ch, false
	}
	if driverVal == nil {
		d.Missing(k.Line, path+".driver", path+".driver is missing", fix)
	}
	switch ch.Driver {
	case DriverOpenAI, DriverAnthropic:
		if ch.Model == "" {
			d.Add(k.Line, fmt.Sprintf("%s uses driver %s but names no model", path, ch.Driver),
				"add the model, such as model: "+ExampleModels[ch.Driver])
		}
		if scriptVal != nil {
			d.Add(scriptVal.Line, fmt.Sprintf("%s.script applies only to driver: script, not %s", path, ch.Driver),
				"remove script:, or set driver: script")
		}
	case DriverScript:
		if scriptVal != nil {
			p.scriptFile(scriptVal, path, ch.Script)
		}
	}
	if ch.ContextWindow > 0 && ch.MaxOutputTokens >= ch.ContextWindow {
		d.Add(d.Lines[path+".max_output_tokens"], fmt.Sprintf("%s.max_output_tokens (%d) leaves no room for input in context_window (%d)", path, ch.MaxOutputTokens, ch.ContextWindow),
			"make max_output_tokens smaller than context_window")
	}
	return ch, true
}

func (p *capsuleParser) scriptFile(v *yaml.Node, path, name string) {
	d := p.d
	if strings.TrimSpace(name) == "" {
		d.Add(v.Line, path+".script is empty", "name the script file, such as script: script.yaml, or remove the key to use the embedded default")
		return
	}
	file := ResolvePath(p.c.Dir, name)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.Add(v.Line, fmt.Sprintf("%s.script %q does not exist (looked for %s)", path, name, file),
			"create it, write its path relative to the capsule directory, or remove script: to use the embedded default")
	case err != nil:
		d.Add(v.Line, fmt.Sprintf("%s.script %q cannot be read: %v", path, name, err), "make the file readable")
	case fi.IsDir():
		d.Add(v.Line, fmt.Sprintf("%s.script %q is a directory", path, name), "name the script.yaml file itself")
	}
}

func (p *capsuleParser) script(k, v *yaml.Node) *ScriptSpec {
	d := p.d
	s := &ScriptSpec{}
	var cmdVal *yaml.Node
	ok := d.Fields(v, "script", []yamldoc.Field{
		{Name: "command", Fn: func(_, v *yaml.Node) {
			cmdVal = v
			s.Command, _ = d.Texts(v, "script.command")
		}},
		{Name: "timeout_secs", Fn: func(_, v *yaml.Node) { s.TimeoutSecs = (d.CountOr0(v, "script.timeout_secs")) }},
	})
	if !ok {
		return s
	}
	p.command(k, cmdVal, s.Command, "script.command", "command: [./answer.sh]")
	return s
}

// command checks a program-and-arguments list; key is the block that holds it, val its value (nil when
// the key is absent).
func (p *capsuleParser) command(k, val *yaml.Node, cmd []string, path, example string) {
	d := p.d
	switch {
	case val == nil:
		d.Missing(k.Line, path, path+" is missing", "name the program and its arguments, such as "+example)
	case yamldoc.IsSeq(val) && len(cmd) == 0:
		d.Add(val.Line, path+" is empty", "name the program and its arguments, such as "+example)
	default:
		for i, s := range cmd {
			if strings.TrimSpace(s) == "" {
				d.Add(yamldoc.ItemLine(val, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
			}
		}
	}
}

// readPaths checks capabilities.shell.read: each entry an existing path, absolute or relative to the
// capsule directory, returned absolute and clean.
func (p *capsuleParser) readPaths(v *yaml.Node) []string {
	d := p.d
	list, ok := d.Texts(v, "capabilities.shell.read")
	if !ok {
		return nil
	}
	var out []string
	for i, s := range list {
		line := yamldoc.ItemLine(v, i)
		if strings.TrimSpace(s) == "" {
			d.Add(line, fmt.Sprintf("capabilities.shell.read[%d] is empty", i), "remove the empty entry")
			continue
		}
		abs := filepath.Clean(ResolvePath(p.c.Dir, s))
		if _, err := os.Stat(abs); err != nil {
			d.Add(line, fmt.Sprintf("capabilities.shell.read entry %q does not exist (looked for %s)", s, abs),
				"create it, write its path absolute or relative to the capsule directory, or remove the entry")
			continue
		}
		out = append(out, abs)
	}
	return out
}

func (p *capsuleParser) capabilities(v *yaml.Node) {
	d, c := p.d, &p.c.Capabilities
	allow := func(path string, dst *AllowList, check func(v *yaml.Node, i int, s string), extra ...yamldoc.Field) yamldoc.Field {
		return yamldoc.Field{Name: yamldoc.LastKey(path), Fn: func(_, v *yaml.Node) {
			d.Fields(v, path, append([]yamldoc.Field{{Name: "allow", Fn: func(_, v *yaml.Node) {
				list, ok := d.Texts(v, path+".allow")
				if !ok {
					return
				}
				dst.Allow = list
				for i, s := range list {
					if strings.TrimSpace(s) == "" {
						d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("%s.allow[%d] is empty", path, i), "remove the empty entry")
					} else if check != nil {
						check(v, i, s)
					}
				}
			}}}, extra...))
		}}
	}
	d.Fields(v, "capabilities", []yamldoc.Field{
		allow("capabilities.shell", &c.Shell.AllowList, func(v *yaml.Node, i int, s string) {
			if strings.ContainsAny(s, "/\\") || strings.ContainsFunc(s, isBlankRune) {
				bare := s
				if f := strings.Fields(s); len(f) > 0 {
					bare = filepath.Base(f[0])
				}
				d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("capabilities.shell.allow entry %q is not a bare program name", s),
					fmt.Sprintf("write the name alone, such as %s: the runtime finds it on PATH, and the model passes arguments with each call", bare))
			}
		},
			yamldoc.Field{Name: "confine", Fn: func(_, v *yaml.Node) {
				if b, ok := d.Flag(v, "capabilities.shell.confine"); ok {
					c.Shell.Confine = &b
				}
			}},
			yamldoc.Field{Name: "timeout_secs", Fn: func(_, v *yaml.Node) { c.Shell.TimeoutSecs = d.CountOr0(v, "capabilities.shell.timeout_secs") }},
			yamldoc.Field{Name: "memory_mb", Fn: func(_, v *yaml.Node) { c.Shell.MemoryMB = d.CountOr0(v, "capabilities.shell.memory_mb") }},
			yamldoc.Field{Name: "output_kb", Fn: func(_, v *yaml.Node) { c.Shell.OutputKB = d.CountOr0(v, "capabilities.shell.output_kb") }},
			yamldoc.Field{Name: "read", Fn: func(_, v *yaml.Node) { c.Shell.Read = p.readPaths(v) }},
			yamldoc.Field{Name: "network", Fn: func(_, v *yaml.Node) { c.Shell.Network, _ = d.Flag(v, "capabilities.shell.network") }},
		),
		allow("capabilities.spawn", &c.Spawn, nil),
		{Name: "plan", Fn: func(_, v *yaml.Node) {
			d.Fields(v, "capabilities.plan", []yamldoc.Field{{Name: "submit", Fn: func(_, v *yaml.Node) {
				c.Plan.Submit, _ = d.Flag(v, "capabilities.plan.submit")
			}}})
		}},
		{Name: "peer_fetch", Fn: func(_, v *yaml.Node) {
			if !yamldoc.IsMapping(v) {
				c.PeerFetch, _ = d.Flag(v, "capabilities.peer_fetch")
				return
			}
			c.PeerFetch = true
			d.Fields(v, "capabilities.peer_fetch", []yamldoc.Field{{Name: "max_mb", Fn: func(_, v *yaml.Node) {
				if n, ok := d.CountInt(v, "capabilities.peer_fetch.max_mb"); ok {
					if n == 0 {
						d.Add(v.Line, "capabilities.peer_fetch.max_mb is 0, so no file could be fetched",
							"write at least 1, such as max_mb: 64, or remove the key for the default of 64")
						return
					}
					c.PeerFetchMaxMB = n
				}
			}}})
		}},
		allow("capabilities.network", &c.Network, nil),
		{Name: "install", Fn: func(_, v *yaml.Node) {
			list := func(key string, dst *[]string) yamldoc.Field {
				return yamldoc.Field{Name: key, Fn: func(_, v *yaml.Node) {
					path := "capabilities.install." + key
					l, ok := d.Texts(v, path)
					if !ok {
						return
					}
					*dst = l
					for i, s := range l {
						if strings.TrimSpace(s) == "" {
							d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
						}
					}
				}}
			}
			d.Fields(v, "capabilities.install", []yamldoc.Field{
				list("tool", &c.Install.Tool), list("skill", &c.Install.Skill), list("from", &c.Install.From),
			})
		}},
		{Name: "hooks", Fn: func(_, v *yaml.Node) {
			d.Fields(v, "capabilities.hooks", []yamldoc.Field{{Name: "inference", Fn: func(_, v *yaml.Node) {
				c.Hooks.Inference, _ = d.Flag(v, "capabilities.hooks.inference")
			}}})
		}},
	})
}

// exports reads exports.peer_files: the export root alone (peer_files: out), or with the lifetime of the
// handles share-file mints (peer_files: {root: out, ttl: 2h}).
func (p *capsuleParser) exports(v *yaml.Node) {
	d, c := p.d, p.c
	root := func(v *yaml.Node, path string) {
		s, ok := d.Text(v, path)
		if !ok {
			return
		}
		c.Exports.PeerFiles = s
		fix := "write a directory inside the workdir, such as " + yamldoc.LastKey(path) + ": out"
		switch {
		case s == "":
			d.Add(v.Line, path+" is empty", fix+" (. for the whole workdir), or remove the key")
		case filepath.IsAbs(s):
			d.Add(v.Line, fmt.Sprintf("%s %q is an absolute path, but the export root is relative to the workdir", path, s), fix)
		case !filepath.IsLocal(s):
			d.Add(v.Line, fmt.Sprintf("%s %q leaves the workdir", path, s), fix)
		}
	}
	d.Fields(v, "exports", []yamldoc.Field{{Name: "peer_files", Fn: func(k, v *yaml.Node) {
		if !yamldoc.IsMapping(v) {
			root(v, "exports.peer_files")
			return
		}
		rootSet := false
		d.Fields(v, "exports.peer_files", []yamldoc.Field{
			{Name: "root", Fn: func(_, v *yaml.Node) { rootSet = true; root(v, "exports.peer_files.root") }},
			{Name: "ttl", Fn: func(_, v *yaml.Node) {
				s, ok := d.Text(v, "exports.peer_files.ttl")
				if !ok {
					return
				}
				ttl, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.Add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is not a duration", s),
						"write a number with a unit, such as ttl: 1h, ttl: 30m or ttl: 90s")
				case ttl < time.Second:
					d.Add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is shorter than a second", s),
						"write at least 1s, such as ttl: 1h, or remove the key for the default of 1h")
				default:
					c.Exports.PeerFilesTTL = ttl
				}
			}},
		})
		if !rootSet {
			d.Add(v.Line, "exports.peer_files has no root", "add the export root, such as peer_files: {root: out, ttl: 1h}")
		}
	}}})
}

func (p *capsuleParser) lifecycle(v *yaml.Node) {
	d, l := p.d, &p.c.Lifecycle
	secs := func(key string, dst **int) yamldoc.Field {
		return yamldoc.Field{Name: key, Fn: func(_, v *yaml.Node) {
			if n, ok := d.CountInt(v, "lifecycle."+key); ok {
				*dst = &n
			}
		}}
	}
	d.Fields(v, "lifecycle", []yamldoc.Field{
		secs("shell_grace_secs", &l.ShellGraceSecs),
		secs("deadline_notice_secs", &l.DeadlineNoticeSecs),
		secs("delegation_deadline_secs", &l.DelegationDeadlineSecs),
		secs("max_task_reopens", &l.MaxTaskReopens),
		secs("input_wait_secs", &l.InputWaitSecs),
		{Name: "keep_working", Fn: func(k, v *yaml.Node) {
			kw := &KeepWorking{}
			limit := false
			if d.Fields(v, "lifecycle.keep_working", []yamldoc.Field{{Name: "limit", Fn: func(_, v *yaml.Node) {
				limit = true
				kw.Limit = (d.CountOr0(v, "lifecycle.keep_working.limit"))
			}}}) {
				if !limit {
					d.Missing(k.Line, "lifecycle.keep_working.limit", "lifecycle.keep_working has no limit", "write keep_working: {limit: 20}")
				}
				l.KeepWorking = kw
			}
		}},
		{Name: "done_check", Fn: func(k, v *yaml.Node) {
			dc := &DoneCheck{}
			limit := false
			var cmdVal *yaml.Node
			if d.Fields(v, "lifecycle.done_check", []yamldoc.Field{
				{Name: "command", Fn: func(_, v *yaml.Node) {
					cmdVal = v
					dc.Command, _ = d.Texts(v, "lifecycle.done_check.command")
				}},
				{Name: "limit", Fn: func(_, v *yaml.Node) {
					limit = true
					dc.Limit = (d.CountOr0(v, "lifecycle.done_check.limit"))
				}},
			}) {
				p.command(k, cmdVal, dc.Command, "lifecycle.done_check.command", "command: [make, check]")
				if !limit {
					d.Missing(k.Line, "lifecycle.done_check.limit", "lifecycle.done_check has no limit", "write how often it may reopen a task, such as limit: 3")
				}
				l.DoneCheck = dc
			}
		}},
	})
}

// store reads store.retention: how long, and how many, ended tasks this member's store keeps.
func (p *capsuleParser) store(v *yaml.Node) {
	d, r := p.d, &p.c.Store.Retention
	d.Fields(v, "store", []yamldoc.Field{{Name: "retention", Fn: func(_, v *yaml.Node) {
		d.Fields(v, "store.retention", []yamldoc.Field{
			{Name: "max_age", Fn: func(_, v *yaml.Node) {
				s, ok := d.Text(v, "store.retention.max_age")
				if !ok {
					return
				}
				age, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.Add(v.Line, fmt.Sprintf("store.retention.max_age %q is not a duration", s),
						"write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)")
				case age < time.Second:
					d.Add(v.Line, fmt.Sprintf("store.retention.max_age %q is shorter than a second", s),
						"write at least 1s, such as max_age: 168h, or remove the key to keep the roster's (or the default of a week)")
				default:
					r.MaxAge = age
				}
			}},
			{Name: "max_tasks", Fn: func(_, v *yaml.Node) {
				n, ok := d.CountInt(v, "store.retention.max_tasks")
				switch {
				case !ok:
				case n == 0:
					d.Add(v.Line, "store.retention.max_tasks is 0, so no ended task could be kept",
						"write at least 1, such as max_tasks: 10000, or remove the key to keep the roster's (or the default of 10000)")
				default:
					r.MaxTasks = n
				}
			}},
		})
	}}})
}

// artifacts reads a list of artifact names, scope/name[@version].
func (p *capsuleParser) artifacts(v *yaml.Node, path, example string) []string {
	d := p.d
	list, ok := d.Texts(v, path)
	if !ok {
		return nil
	}
	seen := map[string]int{}
	for i, s := range list {
		line := yamldoc.ItemLine(v, i)
		d.Lines[fmt.Sprintf("%s[%d]", path, i)] = line
		if !artifactRE.MatchString(s) {
			d.Add(line, fmt.Sprintf("%s entry %q is not an artifact name", path, s),
				"write scope/name or scope/name@version in lowercase, such as "+example)
			continue
		}
		if first, dup := seen[s]; dup {
			d.Add(line, fmt.Sprintf("%s lists %q twice (first at line %d)", path, s, first), "remove one")
		}
		seen[s] = line
	}
	return list
}

// ResolvePath resolves a script driver's script: against the capsule directory.
func ResolvePath(dir, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(dir, name)
}

func isBlankRune(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
