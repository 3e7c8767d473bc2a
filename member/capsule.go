package member

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/roster"
)

// CapsuleFile is the name of a capsule's configuration inside its directory.
const CapsuleFile = "murmur.yaml"

// DefaultQueueSize is the bound of the task queue of a capsule with task_acceptance: queue that sets no
// queue_size.
const DefaultQueueSize = 16

// The values murmur.yaml's enumerated keys take.
const (
	TransportHTTP    = "http"
	TransportProcess = "process"

	AcceptReject = "reject"
	AcceptQueue  = "queue"

	AfterTaskSleep = "sleep"

	ToolRefreshEveryTurn = "every_turn"
	ToolRefreshOnChange  = "on_change"

	DriverScript    = "script"
	DriverOpenAI    = "openai"
	DriverAnthropic = "anthropic"

	// SettingInferenceDriver is the one setting control.agent_settings may hand the agent (switch-driver).
	SettingInferenceDriver = "inference.driver"
)

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
	Lifecycle      Lifecycle
	Deadline       time.Duration // the session's own deadline; 0 = none
	TaskAcceptance string
	QueueSize      int    // bound of the FIFO of waiting tasks under task_acceptance: queue
	AfterTask      string // "" or "sleep"
	Tools          []string
	Skills         []string
	// Store is the store: block: how this member's task store keeps ended tasks. A field it does not set
	// comes from the roster's store: block, then from roster.DefaultRetention.
	Store roster.StoreSettings

	lines map[string]int
}

// IsAgent reports whether the capsule is an agent capsule (it has an inference: block).
func (c *Capsule) IsAgent() bool { return c.Inference != nil }

// Line returns the line of murmur.yaml that writes key, a dotted path such as "inference.driver",
// "inference.choices.gpt" or "tools[1]" for a list entry; 0 when the file does not write it. Staging uses
// it to point its own findings at the line to change.
func (c *Capsule) Line(key string) int { return c.lines[key] }

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

// Harness is the harness: block of a capsule under transport: process (DESIGN §13): the external agent
// harness the runtime runs per task instead of its own agent loop.
type Harness struct {
	Command []string // the harness and its arguments; {prompt}, {session}, {mcp_config} are replaced
	Resume  []string // added after Command to resume the harness's own session
	Dialect string   // harness.Dialects
	Env     []string // NAME (mur's own value passed on) or NAME=value
	Read    []string // absolute paths the harness may read besides its workdir and the system directories
	Network bool     // default true: the harness must reach its model's API
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
}

// Lifecycle is the lifecycle: block. A nil pointer is a key the file does not set.
type Lifecycle struct {
	ShellGraceSecs         *int
	DeadlineNoticeSecs     *int
	DelegationDeadlineSecs *int
	MaxTaskReopens         *int
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

// CapsuleError is one thing wrong in a murmur.yaml, with the line to change and what to write instead.
type CapsuleError struct {
	File string
	Line int // 0 when the error concerns the whole file
	Msg  string
	Fix  string
}

func (e *CapsuleError) Error() string { return formatFileError(e.File, e.Line, e.Msg, e.Fix) }

func formatFileError(file string, line int, msg, fix string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(line))
	}
	b.WriteString(": ")
	b.WriteString(msg)
	if fix != "" {
		b.WriteString("; ")
		b.WriteString(fix)
	}
	return b.String()
}

// LoadCapsule reads and validates dir/murmur.yaml. dir may also name the murmur.yaml itself.
func LoadCapsule(dir string) (*Capsule, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("capsule %s: %w", dir, err)
	}
	path := filepath.Join(abs, CapsuleFile)
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		path = abs
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &CapsuleError{File: path, Msg: "no murmur.yaml in the capsule directory",
			Fix: "create it (with name: and inference: or script:), or point the roster's capsule: at the capsule's directory"}
	}
	if err != nil {
		return nil, &CapsuleError{File: path, Msg: "cannot be read: " + err.Error(), Fix: "make the file readable"}
	}
	return ParseCapsule(path, data)
}

// ParseCapsule parses and validates data as the murmur.yaml at path. Paths the file names (a script
// driver's script.yaml) are resolved against the directory of path and must exist. Every problem is
// reported, joined with errors.Join, each a *CapsuleError, in line order.
func ParseCapsule(path string, data []byte) (*Capsule, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("capsule %s: %w", path, err)
	}
	d := &yamlDoc{
		lines:    map[string]int{},
		misspelt: map[string]bool{},
		mk: func(line int, msg, fix string) error {
			return &CapsuleError{File: abs, Line: line, Msg: msg, Fix: fix}
		},
		misplaced: capsuleMisplaced,
	}
	root := d.root(data, "name: worker, then inference: or script:")
	if root == nil {
		return nil, d.err()
	}
	c := &Capsule{Dir: filepath.Dir(abs), Path: abs, lines: d.lines}
	p := &capsuleParser{d: d, c: c}
	p.top(root)
	if err := d.err(); err != nil {
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
	"max_task_reopens": "lifecycle", "keep_working": "lifecycle", "done_check": "lifecycle",
	"retention": "store",
}

type capsuleParser struct {
	d *yamlDoc
	c *Capsule
	// process: the file says transport: process, so inference: needs no driver choices (the harness
	// runs its own model).
	process bool
}

var (
	envNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	choiceNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	artifactRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*(@[0-9A-Za-z][0-9A-Za-z.+_-]*)?$`)
	exampleModels = map[string]string{DriverOpenAI: "gpt-4.1-mini", DriverAnthropic: "claude-sonnet-4-5"}
)

func (p *capsuleParser) top(n *yaml.Node) {
	d, c := p.d, p.c
	var nameKey, infKey, scriptKey, queueKey, afterKey, acceptKey, harnessKey, transportKey *yaml.Node
	queueSet := false
	p.process = declaresProcess(n)
	d.fields(n, "", []yamlField{
		{"name", func(k, v *yaml.Node) {
			nameKey = k
			if s, ok := d.text(v, "name"); ok {
				c.Name = s
				if strings.TrimSpace(s) == "" {
					d.add(v.Line, "name is empty", "write the capsule's name, such as name: worker")
				}
			}
		}},
		{"description", func(_, v *yaml.Node) { c.Description, _ = d.text(v, "description") }},
		{"instructions", func(_, v *yaml.Node) { c.Instructions, _ = d.text(v, "instructions") }},
		{"inference", func(k, v *yaml.Node) { infKey = k; c.Inference = p.inference(k, v) }},
		{"script", func(k, v *yaml.Node) { scriptKey = k; c.Script = p.script(k, v) }},
		{"transport", func(k, v *yaml.Node) {
			transportKey = k
			c.Transport, _ = d.enum(v, "transport", TransportHTTP, TransportProcess)
		}},
		{"harness", func(k, v *yaml.Node) { harnessKey = k; c.Harness = p.harness(v) }},
		{"capabilities", func(_, v *yaml.Node) { p.capabilities(v) }},
		{"exports", func(_, v *yaml.Node) { p.exports(v) }},
		{"control", func(_, v *yaml.Node) {
			d.fields(v, "control", []yamlField{{"agent_settings", func(_, v *yaml.Node) {
				list, ok := d.texts(v, "control.agent_settings")
				if !ok {
					return
				}
				c.Control.AgentSettings = list
				for i, s := range list {
					if s != SettingInferenceDriver {
						d.add(yamlItemLine(v, i), fmt.Sprintf("control.agent_settings entry %q is not a setting the agent may change", s),
							"the settings are: "+SettingInferenceDriver+didYouMean(s, []string{SettingInferenceDriver}))
					}
				}
			}}})
		}},
		{"lifecycle", func(_, v *yaml.Node) { p.lifecycle(v) }},
		{"deadline", func(_, v *yaml.Node) {
			s, ok := d.text(v, "deadline")
			if !ok {
				return
			}
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.add(v.Line, fmt.Sprintf("deadline %q is not a duration", s),
					"write a number with a unit, such as deadline: 2h, deadline: 90m or deadline: 45s")
			case dur < 0:
				d.add(v.Line, fmt.Sprintf("deadline %q is negative", s), "write a positive duration such as deadline: 2h, or remove the key for no deadline")
			default:
				c.Deadline = dur
			}
		}},
		{"task_acceptance", func(k, v *yaml.Node) {
			acceptKey = k
			c.TaskAcceptance, _ = d.enum(v, "task_acceptance", AcceptReject, AcceptQueue)
		}},
		{"queue_size", func(k, v *yaml.Node) {
			queueKey = k
			if n, ok := d.countInt(v, "queue_size"); ok {
				queueSet = true
				c.QueueSize = n
				if n == 0 {
					d.add(v.Line, "queue_size is 0, so no task could ever wait", "write at least 1, such as queue_size: 16, or remove the key for the default of 16")
				}
			}
		}},
		{"after_task", func(k, v *yaml.Node) {
			afterKey = k
			c.AfterTask, _ = d.enum(v, "after_task", AfterTaskSleep)
		}},
		{"tools", func(_, v *yaml.Node) { c.Tools = p.artifacts(v, "tools", "local/bash or local/bash@1.2.0") }},
		{"skills", func(_, v *yaml.Node) { c.Skills = p.artifacts(v, "skills", "local/style or local/style@1.0.0") }},
		{"store", func(_, v *yaml.Node) { p.store(v) }},
	})

	// Cross-key checks and defaults.
	if nameKey == nil {
		d.missing(n.Line, "name", "name is missing", "add the capsule's name, such as name: worker")
	}
	switch {
	case infKey != nil && scriptKey != nil:
		d.add(scriptKey.Line, fmt.Sprintf("script: is for script capsules, but this capsule has inference: (line %d)", infKey.Line),
			"remove script: for an agent capsule, or remove inference: for a script capsule")
		c.Script = nil
	case infKey == nil && scriptKey == nil && !p.process:
		d.add(n.Line, "the capsule has neither inference: nor script:",
			"add inference: for an agent capsule run by a model, or script: {command: [./answer.sh]} for a script capsule that runs a program per task")
	}
	if c.Transport == "" {
		c.Transport = TransportHTTP
	}
	p.processChecks(n, harnessKey, transportKey, scriptKey)
	if c.TaskAcceptance == "" {
		c.TaskAcceptance = AcceptReject
	}
	if c.TaskAcceptance != AcceptQueue {
		if queueSet {
			d.add(queueKey.Line, "queue_size applies only with task_acceptance: queue",
				"add task_acceptance: queue, or remove queue_size")
		}
		if c.AfterTask == AfterTaskSleep {
			fix := "add task_acceptance: queue, or remove after_task"
			if acceptKey != nil {
				fix = fmt.Sprintf("set task_acceptance: queue (line %d), or remove after_task", acceptKey.Line)
			}
			d.add(afterKey.Line, "after_task: sleep needs task_acceptance: queue", fix)
		}
	} else if !queueSet {
		c.QueueSize = DefaultQueueSize
	}
	if !c.IsAgent() && infKey == nil && slices.Contains(c.Control.AgentSettings, SettingInferenceDriver) {
		d.add(d.lines["control.agent_settings"], "control.agent_settings lists inference.driver, but a script capsule has no inference: block",
			"remove inference.driver from control.agent_settings, or make this an agent capsule")
	}
}

func (p *capsuleParser) inference(k, v *yaml.Node) *Inference {
	d := p.d
	inf := &Inference{Choices: map[string]Choice{}}
	var driverKey, driverVal, choicesKey *yaml.Node
	var declared []string
	ok := d.fields(v, "inference", []yamlField{
		{"driver", func(k, v *yaml.Node) {
			driverKey = k
			if s, ok := d.text(v, "inference.driver"); ok {
				inf.Driver, driverVal = s, v
			}
		}},
		{"choices", func(k, v *yaml.Node) {
			choicesKey = k
			if d.entries(v, "inference.choices", func(k, v *yaml.Node) {
				name := k.Value
				declared = append(declared, name)
				if !choiceNameRE.MatchString(name) {
					d.add(k.Line, fmt.Sprintf("driver choice name %q is not a plain name", name),
						"name it with letters, digits, '-', '_' or '.', such as local or gpt-mini")
					return
				}
				if ch, ok := p.choice(k, v, "inference.choices."+name); ok {
					inf.Choices[name] = ch
					inf.ChoiceOrder = append(inf.ChoiceOrder, name)
				}
			}) && len(declared) == 0 {
				d.add(k.Line, "inference.choices declares no choice",
					"declare at least one, such as choices: {local: {driver: script}}")
			}
		}},
		{"max_turns", func(_, v *yaml.Node) {
			inf.MaxTurns = d.countOr0(v, "inference.max_turns")
		}},
		{"max_session_tokens", func(_, v *yaml.Node) { inf.MaxSessionTokens, _ = d.count(v, "inference.max_session_tokens") }},
		{"compaction", func(k, v *yaml.Node) {
			set := false
			d.fields(v, "inference.compaction", []yamlField{{"threshold", func(_, v *yaml.Node) {
				set = true
				t, ok := d.number(v, "inference.compaction.threshold")
				if !ok {
					return
				}
				if t <= 0 || t > 1 {
					d.add(v.Line, fmt.Sprintf("inference.compaction.threshold must be more than 0 and at most 1, not %s", v.Value),
						"write the fraction of the context budget at which compaction fires, such as threshold: 0.8")
					return
				}
				inf.Compaction.Threshold = t
			}}})
			if !set && yamlIsMapping(v) {
				d.missing(k.Line, "inference.compaction.threshold", "inference.compaction has no threshold", "write compaction: {threshold: 0.8}, or remove compaction")
			}
		}},
		{"tool_refresh", func(_, v *yaml.Node) {
			inf.ToolRefresh, _ = d.enum(v, "inference.tool_refresh", ToolRefreshEveryTurn, ToolRefreshOnChange)
		}},
	})
	if !ok {
		return inf
	}
	if p.process {
		if choicesKey != nil {
			d.add(choicesKey.Line, "inference.choices is for transport: http; under transport: process the harness runs its own model",
				"remove inference.driver and inference.choices, and configure the model in the harness's command")
		}
		return inf
	}
	if choicesKey == nil {
		d.missing(k.Line, "inference.choices", "inference.choices is missing",
			"declare the driver choices, such as choices: {local: {driver: script}}")
	}
	switch {
	case driverKey == nil:
		fix := "name the choice the session starts on, such as driver: local"
		if len(declared) > 0 {
			fix = "name the choice the session starts on, such as driver: " + declared[0]
		}
		d.missing(k.Line, "inference.driver", "inference.driver is missing", fix)
	case driverVal != nil && len(declared) > 0 && !slices.Contains(declared, inf.Driver):
		d.add(driverVal.Line, fmt.Sprintf("inference.driver %q names no declared choice", inf.Driver),
			"declared choices: "+strings.Join(declared, ", ")+didYouMean(inf.Driver, declared))
	}
	return inf
}

func (p *capsuleParser) choice(k, v *yaml.Node, path string) (Choice, bool) {
	d := p.d
	var ch Choice
	var scriptVal, driverVal *yaml.Node
	fix := "write driver: script, driver: openai or driver: anthropic"
	ok := d.fields(v, path, []yamlField{
		{"driver", func(_, v *yaml.Node) {
			driverVal = v
			ch.Driver, _ = d.enum(v, path+".driver", DriverScript, DriverOpenAI, DriverAnthropic)
		}},
		{"model", func(_, v *yaml.Node) { ch.Model, _ = d.text(v, path+".model") }},
		{"base_url", func(_, v *yaml.Node) {
			s, ok := d.text(v, path+".base_url")
			if !ok {
				return
			}
			ch.BaseURL = s
			if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.add(v.Line, fmt.Sprintf("%s.base_url %q is not an http or https URL", path, s),
					"write the API's base URL, such as base_url: http://127.0.0.1:11434/v1")
			}
		}},
		{"credential", func(_, v *yaml.Node) {
			s, ok := d.text(v, path+".credential")
			if !ok {
				return
			}
			ch.Credential = s
			// The value is never quoted back: a key written here by mistake must not reach a log.
			switch name, isEnv := strings.CutPrefix(s, "env:"); {
			case isEnv && envNameRE.MatchString(name):
			case isEnv:
				d.add(v.Line, path+".credential names no valid environment variable after env:",
					"write credential: env:NAME with NAME made of letters, digits and '_', such as env:OPENAI_API_KEY")
			case strings.HasPrefix(s, "file:") && len(s) > len("file:"):
			default:
				d.add(v.Line, path+".credential is neither env:NAME nor file:PATH",
					"write credential: env:OPENAI_API_KEY to read the key from the environment, or credential: file:/run/secrets/key to read it from a file; never write the key itself in murmur.yaml")
			}
		}},
		{"script", func(_, v *yaml.Node) {
			if s, ok := d.text(v, path+".script"); ok {
				ch.Script, scriptVal = s, v
			}
		}},
		{"context_window", func(_, v *yaml.Node) { ch.ContextWindow = (d.countOr0(v, path+".context_window")) }},
		{"max_output_tokens", func(_, v *yaml.Node) { ch.MaxOutputTokens = (d.countOr0(v, path+".max_output_tokens")) }},
		{"max_input_tokens", func(_, v *yaml.Node) { ch.MaxInputTokens = (d.countOr0(v, path+".max_input_tokens")) }},
	})
	if !ok {
		return ch, false
	}
	if driverVal == nil {
		d.missing(k.Line, path+".driver", path+".driver is missing", fix)
	}
	switch ch.Driver {
	case DriverOpenAI, DriverAnthropic:
		if ch.Model == "" {
			d.add(k.Line, fmt.Sprintf("%s uses driver %s but names no model", path, ch.Driver),
				"add the model, such as model: "+exampleModels[ch.Driver])
		}
		if scriptVal != nil {
			d.add(scriptVal.Line, fmt.Sprintf("%s.script applies only to driver: script, not %s", path, ch.Driver),
				"remove script:, or set driver: script")
		}
	case DriverScript:
		if scriptVal != nil {
			p.scriptFile(scriptVal, path, ch.Script)
		}
	}
	if ch.ContextWindow > 0 && ch.MaxOutputTokens >= ch.ContextWindow {
		d.add(d.lines[path+".max_output_tokens"], fmt.Sprintf("%s.max_output_tokens (%d) leaves no room for input in context_window (%d)", path, ch.MaxOutputTokens, ch.ContextWindow),
			"make max_output_tokens smaller than context_window")
	}
	return ch, true
}

func (p *capsuleParser) scriptFile(v *yaml.Node, path, name string) {
	d := p.d
	if strings.TrimSpace(name) == "" {
		d.add(v.Line, path+".script is empty", "name the script file, such as script: script.yaml, or remove the key to use the embedded default")
		return
	}
	file := scriptPath(p.c.Dir, name)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.add(v.Line, fmt.Sprintf("%s.script %q does not exist (looked for %s)", path, name, file),
			"create it, write its path relative to the capsule directory, or remove script: to use the embedded default")
	case err != nil:
		d.add(v.Line, fmt.Sprintf("%s.script %q cannot be read: %v", path, name, err), "make the file readable")
	case fi.IsDir():
		d.add(v.Line, fmt.Sprintf("%s.script %q is a directory", path, name), "name the script.yaml file itself")
	}
}

func (p *capsuleParser) script(k, v *yaml.Node) *ScriptSpec {
	d := p.d
	s := &ScriptSpec{}
	var cmdVal *yaml.Node
	ok := d.fields(v, "script", []yamlField{
		{"command", func(_, v *yaml.Node) {
			cmdVal = v
			s.Command, _ = d.texts(v, "script.command")
		}},
		{"timeout_secs", func(_, v *yaml.Node) { s.TimeoutSecs = (d.countOr0(v, "script.timeout_secs")) }},
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
		d.missing(k.Line, path, path+" is missing", "name the program and its arguments, such as "+example)
	case yamlIsSeq(val) && len(cmd) == 0:
		d.add(val.Line, path+" is empty", "name the program and its arguments, such as "+example)
	default:
		for i, s := range cmd {
			if strings.TrimSpace(s) == "" {
				d.add(yamlItemLine(val, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
			}
		}
	}
}

// readPaths checks capabilities.shell.read: each entry an existing path, absolute or relative to the
// capsule directory, returned absolute and clean.
func (p *capsuleParser) readPaths(v *yaml.Node) []string {
	d := p.d
	list, ok := d.texts(v, "capabilities.shell.read")
	if !ok {
		return nil
	}
	var out []string
	for i, s := range list {
		line := yamlItemLine(v, i)
		if strings.TrimSpace(s) == "" {
			d.add(line, fmt.Sprintf("capabilities.shell.read[%d] is empty", i), "remove the empty entry")
			continue
		}
		abs := filepath.Clean(capsulePath(p.c.Dir, s))
		if _, err := os.Stat(abs); err != nil {
			d.add(line, fmt.Sprintf("capabilities.shell.read entry %q does not exist (looked for %s)", s, abs),
				"create it, write its path absolute or relative to the capsule directory, or remove the entry")
			continue
		}
		out = append(out, abs)
	}
	return out
}

func (p *capsuleParser) capabilities(v *yaml.Node) {
	d, c := p.d, &p.c.Capabilities
	allow := func(path string, dst *AllowList, check func(v *yaml.Node, i int, s string), extra ...yamlField) yamlField {
		return yamlField{path[strings.LastIndexByte(path, '.')+1:], func(_, v *yaml.Node) {
			d.fields(v, path, append([]yamlField{{"allow", func(_, v *yaml.Node) {
				list, ok := d.texts(v, path+".allow")
				if !ok {
					return
				}
				dst.Allow = list
				for i, s := range list {
					if strings.TrimSpace(s) == "" {
						d.add(yamlItemLine(v, i), fmt.Sprintf("%s.allow[%d] is empty", path, i), "remove the empty entry")
					} else if check != nil {
						check(v, i, s)
					}
				}
			}}}, extra...))
		}}
	}
	d.fields(v, "capabilities", []yamlField{
		allow("capabilities.shell", &c.Shell.AllowList, func(v *yaml.Node, i int, s string) {
			if strings.ContainsAny(s, "/\\") || strings.ContainsFunc(s, isBlankRune) {
				bare := s
				if f := strings.Fields(s); len(f) > 0 {
					bare = filepath.Base(f[0])
				}
				d.add(yamlItemLine(v, i), fmt.Sprintf("capabilities.shell.allow entry %q is not a bare program name", s),
					fmt.Sprintf("write the name alone, such as %s: the runtime finds it on PATH, and the model passes arguments with each call", bare))
			}
		},
			yamlField{"confine", func(_, v *yaml.Node) {
				if b, ok := d.flag(v, "capabilities.shell.confine"); ok {
					c.Shell.Confine = &b
				}
			}},
			yamlField{"timeout_secs", func(_, v *yaml.Node) { c.Shell.TimeoutSecs = d.countOr0(v, "capabilities.shell.timeout_secs") }},
			yamlField{"memory_mb", func(_, v *yaml.Node) { c.Shell.MemoryMB = d.countOr0(v, "capabilities.shell.memory_mb") }},
			yamlField{"output_kb", func(_, v *yaml.Node) { c.Shell.OutputKB = d.countOr0(v, "capabilities.shell.output_kb") }},
			yamlField{"read", func(_, v *yaml.Node) { c.Shell.Read = p.readPaths(v) }},
			yamlField{"network", func(_, v *yaml.Node) { c.Shell.Network, _ = d.flag(v, "capabilities.shell.network") }},
		),
		allow("capabilities.spawn", &c.Spawn, nil),
		{"plan", func(_, v *yaml.Node) {
			d.fields(v, "capabilities.plan", []yamlField{{"submit", func(_, v *yaml.Node) {
				c.Plan.Submit, _ = d.flag(v, "capabilities.plan.submit")
			}}})
		}},
		{"peer_fetch", func(_, v *yaml.Node) {
			if !yamlIsMapping(v) {
				c.PeerFetch, _ = d.flag(v, "capabilities.peer_fetch")
				return
			}
			c.PeerFetch = true
			d.fields(v, "capabilities.peer_fetch", []yamlField{{"max_mb", func(_, v *yaml.Node) {
				if n, ok := d.countInt(v, "capabilities.peer_fetch.max_mb"); ok {
					if n == 0 {
						d.add(v.Line, "capabilities.peer_fetch.max_mb is 0, so no file could be fetched",
							"write at least 1, such as max_mb: 64, or remove the key for the default of 64")
						return
					}
					c.PeerFetchMaxMB = n
				}
			}}})
		}},
		allow("capabilities.network", &c.Network, nil),
		{"install", func(_, v *yaml.Node) {
			list := func(key string, dst *[]string) yamlField {
				return yamlField{key, func(_, v *yaml.Node) {
					path := "capabilities.install." + key
					l, ok := d.texts(v, path)
					if !ok {
						return
					}
					*dst = l
					for i, s := range l {
						if strings.TrimSpace(s) == "" {
							d.add(yamlItemLine(v, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
						}
					}
				}}
			}
			d.fields(v, "capabilities.install", []yamlField{
				list("tool", &c.Install.Tool), list("skill", &c.Install.Skill), list("from", &c.Install.From),
			})
		}},
	})
}

// exports reads exports.peer_files: the export root alone (peer_files: out), or with the lifetime of the
// handles share-file mints (peer_files: {root: out, ttl: 2h}).
func (p *capsuleParser) exports(v *yaml.Node) {
	d, c := p.d, p.c
	root := func(v *yaml.Node, path string) {
		s, ok := d.text(v, path)
		if !ok {
			return
		}
		c.Exports.PeerFiles = s
		fix := "write a directory inside the workdir, such as " + yamlLastKey(path) + ": out"
		switch {
		case s == "":
			d.add(v.Line, path+" is empty", fix+" (. for the whole workdir), or remove the key")
		case filepath.IsAbs(s):
			d.add(v.Line, fmt.Sprintf("%s %q is an absolute path, but the export root is relative to the workdir", path, s), fix)
		case !filepath.IsLocal(s):
			d.add(v.Line, fmt.Sprintf("%s %q leaves the workdir", path, s), fix)
		}
	}
	d.fields(v, "exports", []yamlField{{"peer_files", func(k, v *yaml.Node) {
		if !yamlIsMapping(v) {
			root(v, "exports.peer_files")
			return
		}
		rootSet := false
		d.fields(v, "exports.peer_files", []yamlField{
			{"root", func(_, v *yaml.Node) { rootSet = true; root(v, "exports.peer_files.root") }},
			{"ttl", func(_, v *yaml.Node) {
				s, ok := d.text(v, "exports.peer_files.ttl")
				if !ok {
					return
				}
				ttl, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is not a duration", s),
						"write a number with a unit, such as ttl: 1h, ttl: 30m or ttl: 90s")
				case ttl < time.Second:
					d.add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is shorter than a second", s),
						"write at least 1s, such as ttl: 1h, or remove the key for the default of 1h")
				default:
					c.Exports.PeerFilesTTL = ttl
				}
			}},
		})
		if !rootSet {
			d.add(v.Line, "exports.peer_files has no root", "add the export root, such as peer_files: {root: out, ttl: 1h}")
		}
	}}})
}

func (p *capsuleParser) lifecycle(v *yaml.Node) {
	d, l := p.d, &p.c.Lifecycle
	secs := func(key string, dst **int) yamlField {
		return yamlField{key, func(_, v *yaml.Node) {
			if n, ok := d.countInt(v, "lifecycle."+key); ok {
				*dst = &n
			}
		}}
	}
	d.fields(v, "lifecycle", []yamlField{
		secs("shell_grace_secs", &l.ShellGraceSecs),
		secs("deadline_notice_secs", &l.DeadlineNoticeSecs),
		secs("delegation_deadline_secs", &l.DelegationDeadlineSecs),
		secs("max_task_reopens", &l.MaxTaskReopens),
		{"keep_working", func(k, v *yaml.Node) {
			kw := &KeepWorking{}
			limit := false
			if d.fields(v, "lifecycle.keep_working", []yamlField{{"limit", func(_, v *yaml.Node) {
				limit = true
				kw.Limit = (d.countOr0(v, "lifecycle.keep_working.limit"))
			}}}) {
				if !limit {
					d.missing(k.Line, "lifecycle.keep_working.limit", "lifecycle.keep_working has no limit", "write keep_working: {limit: 20}")
				}
				l.KeepWorking = kw
			}
		}},
		{"done_check", func(k, v *yaml.Node) {
			dc := &DoneCheck{}
			limit := false
			var cmdVal *yaml.Node
			if d.fields(v, "lifecycle.done_check", []yamlField{
				{"command", func(_, v *yaml.Node) {
					cmdVal = v
					dc.Command, _ = d.texts(v, "lifecycle.done_check.command")
				}},
				{"limit", func(_, v *yaml.Node) {
					limit = true
					dc.Limit = (d.countOr0(v, "lifecycle.done_check.limit"))
				}},
			}) {
				p.command(k, cmdVal, dc.Command, "lifecycle.done_check.command", "command: [make, check]")
				if !limit {
					d.missing(k.Line, "lifecycle.done_check.limit", "lifecycle.done_check has no limit", "write how often it may reopen a task, such as limit: 3")
				}
				l.DoneCheck = dc
			}
		}},
	})
}

// store reads store.retention: how long, and how many, ended tasks this member's store keeps.
func (p *capsuleParser) store(v *yaml.Node) {
	d, r := p.d, &p.c.Store.Retention
	d.fields(v, "store", []yamlField{{"retention", func(_, v *yaml.Node) {
		d.fields(v, "store.retention", []yamlField{
			{"max_age", func(_, v *yaml.Node) {
				s, ok := d.text(v, "store.retention.max_age")
				if !ok {
					return
				}
				age, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.add(v.Line, fmt.Sprintf("store.retention.max_age %q is not a duration", s),
						"write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)")
				case age < time.Second:
					d.add(v.Line, fmt.Sprintf("store.retention.max_age %q is shorter than a second", s),
						"write at least 1s, such as max_age: 168h, or remove the key to keep the roster's (or the default of a week)")
				default:
					r.MaxAge = age
				}
			}},
			{"max_tasks", func(_, v *yaml.Node) {
				n, ok := d.countInt(v, "store.retention.max_tasks")
				switch {
				case !ok:
				case n == 0:
					d.add(v.Line, "store.retention.max_tasks is 0, so no ended task could be kept",
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
	list, ok := d.texts(v, path)
	if !ok {
		return nil
	}
	seen := map[string]int{}
	for i, s := range list {
		line := yamlItemLine(v, i)
		d.lines[fmt.Sprintf("%s[%d]", path, i)] = line
		if !artifactRE.MatchString(s) {
			d.add(line, fmt.Sprintf("%s entry %q is not an artifact name", path, s),
				"write scope/name or scope/name@version in lowercase, such as "+example)
			continue
		}
		if first, dup := seen[s]; dup {
			d.add(line, fmt.Sprintf("%s lists %q twice (first at line %d)", path, s, first), "remove one")
		}
		seen[s] = line
	}
	return list
}

// yamlDoc decodes one YAML file through yaml.Node, so that every problem carries its line, and collects
// the problems instead of stopping at the first. It serves murmur.yaml and script.yaml.
type yamlDoc struct {
	mk        func(line int, msg, fix string) error
	errs      []yamlLineErr
	lines     map[string]int    // dotted key path -> line of the key
	misspelt  map[string]bool   // dotted key paths an unknown key was taken to misspell
	misplaced map[string]string // top-level key -> the block it belongs to
}

type yamlLineErr struct {
	line int
	err  error
}

type yamlField struct {
	name string
	fn   func(k, v *yaml.Node)
}

func (d *yamlDoc) add(line int, msg, fix string) {
	d.errs = append(d.errs, yamlLineErr{line, d.mk(line, msg, fix)})
}

// missing reports that the key at path (dotted) is missing, unless the file wrote a misspelling of it,
// which has been reported already.
func (d *yamlDoc) missing(line int, path, msg, fix string) {
	if !d.misspelt[path] {
		d.add(line, msg, fix)
	}
}

// err returns every problem in line order, joined; nil when there is none.
func (d *yamlDoc) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].line < d.errs[j].line })
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e.err
	}
	return errors.Join(errs...)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// root parses data and returns its top-level mapping, or nil after recording why there is none.
func (d *yamlDoc) root(data []byte, example string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
			if line > yamlLastLine(data) {
				line = yamlOpenedLine(data)
			}
		}
		d.add(line, "not valid YAML: "+msg,
			"fix the syntax there: indent with spaces only, and quote text that holds \": \" or starts with one of {[*&!|>%@'\"")
		return nil
	}
	if len(doc.Content) == 0 {
		d.add(1, "the file is empty", "write "+example)
		return nil
	}
	if size := yamlExpandedSize(doc.Content[0], map[*yaml.Node]int{}); size > maxExpandedNodes {
		d.add(1, fmt.Sprintf("the file expands to more than %d values through its aliases", maxExpandedNodes),
			"write the values out instead of nesting *aliases")
		return nil
	}
	n := yamlDeref(doc.Content[0])
	if n.Kind != yaml.MappingNode {
		d.add(n.Line, fmt.Sprintf("the file must be a mapping of keys, not %s", yamlDescribe(n)), "write "+example)
		return nil
	}
	return n
}

// yamlLastLine returns the number of the last line of data as YAML counts lines: it breaks them at \n,
// \r, \r\n, NEL, LS and PS, and a break that ends the file starts no line.
func yamlLastLine(data []byte) int {
	n, prev := 1, rune(0)
	for _, c := range string(data) {
		switch {
		case c == '\n' && prev == '\r':
		case c == '\n', c == '\r', c == '\u0085', c == '\u2028', c == '\u2029':
			n++
		}
		prev = c
	}
	if strings.ContainsRune("\n\r\u0085\u2028\u2029", prev) {
		n--
	}
	return max(n, 1)
}

// yamlOpenedLine finds the line of a syntax error that yaml.v3 put past the end of data. It does that
// when the construct left open at the end of the file (a quoted scalar, a flow collection) began on the
// first line: the error then has no context line, and names where the file ends. The line where the
// construct began is the last of the shortest run of lines from the top that fails to parse.
func yamlOpenedLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for k := 1; k <= len(lines) && k <= 5000; k++ {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) != nil {
			return k
		}
	}
	return yamlLastLine(data)
}

// maxExpandedNodes bounds the values a file may hold once its aliases are expanded, so that a few
// nested aliases cannot make the decoder walk billions of nodes.
const maxExpandedNodes = 100_000

// yamlExpandedSize counts the values under n with every alias expanded, each shared node counted once per
// use but computed once.
func yamlExpandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = maxExpandedNodes + 1 // an alias cycle counts as too large
	size := 1
	if n.Kind == yaml.AliasNode {
		size = yamlExpandedSize(n.Alias, memo)
	}
	for _, c := range n.Content {
		size += yamlExpandedSize(c, memo)
		if size > maxExpandedNodes {
			break
		}
	}
	memo[n] = size
	return size
}

// fields walks the mapping n, the value of path ("" for the top level), handing each known key's value
// to its field; it reports unknown and duplicate keys. It reports false when n is not a mapping.
func (d *yamlDoc) fields(n *yaml.Node, path string, fs []yamlField) bool {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return d.walk(n, path, func(k, v *yaml.Node) {
		i := slices.Index(names, k.Value)
		if i < 0 {
			where := "in " + path
			if path == "" {
				where = "at the top level"
			}
			msg := fmt.Sprintf("unknown key %q %s", k.Value, where)
			if block, ok := d.misplaced[k.Value]; ok && path == "" {
				d.add(k.Line, msg, fmt.Sprintf("%s belongs under %s:; move it there, as %s.%s", k.Value, block, block, k.Value))
				return
			}
			if near := closestName(k.Value, names); near != "" {
				d.misspelt[yamlJoin(path, near)] = true
			}
			d.add(k.Line, msg, "known keys: "+strings.Join(names, ", ")+didYouMean(k.Value, names))
			return
		}
		fs[i].fn(k, v)
	})
}

// entries walks the mapping n whose keys are names the file chooses.
func (d *yamlDoc) entries(n *yaml.Node, path string, fn func(k, v *yaml.Node)) bool {
	return d.walk(n, path, fn)
}

func (d *yamlDoc) walk(n *yaml.Node, path string, fn func(k, v *yaml.Node)) bool {
	if !d.isKind(n, yaml.MappingNode, path) {
		return false
	}
	n = yamlDeref(n)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], yamlDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, fmt.Sprintf("a key %s is %s", yamlWhere(path), yamlDescribe(k)), "write plain names as keys")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, fmt.Sprintf("key %q appears twice %s (first at line %d)", k.Value, yamlWhere(path), first), "keep one of them")
			continue
		}
		seen[k.Value] = k.Line
		d.lines[yamlJoin(path, k.Value)] = k.Line
		fn(k, v)
	}
	return true
}

func yamlWhere(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}

func yamlJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func yamlLastKey(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// isKind reports whether n is of kind want, recording a type error naming path when it is not.
func (d *yamlDoc) isKind(n *yaml.Node, want yaml.Kind, path string) bool {
	n = yamlDeref(n)
	if n.Kind == want && !yamlIsNull(n) {
		return true
	}
	name := path
	if name == "" {
		name = "the file"
	}
	if yamlIsNull(n) {
		d.add(n.Line, name+" has no value", "give it a value, or remove the key")
		return false
	}
	switch want {
	case yaml.MappingNode:
		d.add(n.Line, fmt.Sprintf("%s must be a mapping of keys, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write its keys indented under %s:, or as %s: {key: value}", yamlLastKey(path), yamlLastKey(path)))
	case yaml.SequenceNode:
		d.add(n.Line, fmt.Sprintf("%s must be a list, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write %s: [a, b], or one \"- item\" line per entry", yamlLastKey(path)))
	case yaml.ScalarNode:
		d.add(n.Line, fmt.Sprintf("%s must be a single value, not %s", name, yamlDescribe(n)),
			fmt.Sprintf("write the value on the same line, such as %s: value (quote text that holds \": \")", yamlLastKey(path)))
	}
	return false
}

// text reads a scalar as text. Numbers and booleans are taken as written.
func (d *yamlDoc) text(v *yaml.Node, path string) (string, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return "", false
	}
	return yamlDeref(v).Value, true
}

// texts reads a list of scalars.
func (d *yamlDoc) texts(v *yaml.Node, path string) ([]string, bool) {
	if !d.isKind(v, yaml.SequenceNode, path) {
		return nil, false
	}
	v = yamlDeref(v)
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, item := range v.Content {
		item = yamlDeref(item)
		if item.Kind != yaml.ScalarNode || yamlIsNull(item) {
			d.add(item.Line, fmt.Sprintf("%s[%d] must be a single value, not %s", path, i, yamlDescribe(item)),
				fmt.Sprintf("write each entry of %s as plain text, such as %s: [a, b]", yamlLastKey(path), yamlLastKey(path)))
			ok = false
			continue
		}
		out = append(out, item.Value)
	}
	return out, ok
}

// count reads a whole number of 0 or more.
func (d *yamlDoc) count(v *yaml.Node, path string) (int64, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return 0, false
	}
	v = yamlDeref(v)
	key := yamlLastKey(path)
	n, err := strconv.ParseInt(v.Value, 0, 64)
	switch {
	case v.ShortTag() == "!!str" && err == nil:
		d.add(v.Line, fmt.Sprintf("%s must be a whole number, not the quoted text %q", path, v.Value),
			fmt.Sprintf("remove the quotes: %s: %s", key, v.Value))
	case v.ShortTag() != "!!int" || err != nil:
		d.add(v.Line, fmt.Sprintf("%s must be a whole number, not %s", path, yamlDescribe(v)),
			fmt.Sprintf("write a whole number of 0 or more, such as %s: 10", key))
	case n < 0:
		d.add(v.Line, fmt.Sprintf("%s must be 0 or more, not %d", path, n),
			fmt.Sprintf("write a whole number of 0 or more, such as %s: 10", key))
	default:
		return n, true
	}
	return 0, false
}

// countInt reads a whole number of 0 or more that fits an int32.
func (d *yamlDoc) countInt(v *yaml.Node, path string) (int, bool) {
	n, ok := d.count(v, path)
	if ok && n > math.MaxInt32 {
		d.add(yamlDeref(v).Line, fmt.Sprintf("%s is too large: %d", path, n), fmt.Sprintf("write at most %d", math.MaxInt32))
		return 0, false
	}
	return int(n), ok
}

func (d *yamlDoc) countOr0(v *yaml.Node, path string) int {
	n, _ := d.countInt(v, path)
	return n
}

// number reads a number, whole or not.
func (d *yamlDoc) number(v *yaml.Node, path string) (float64, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return 0, false
	}
	v = yamlDeref(v)
	f, err := strconv.ParseFloat(v.Value, 64)
	tag := v.ShortTag()
	switch {
	case tag == "!!str" && err == nil:
		d.add(v.Line, fmt.Sprintf("%s must be a number, not the quoted text %q", path, v.Value),
			fmt.Sprintf("remove the quotes: %s: %s", yamlLastKey(path), v.Value))
	case (tag != "!!int" && tag != "!!float") || err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		d.add(v.Line, fmt.Sprintf("%s must be a number, not %s", path, yamlDescribe(v)),
			fmt.Sprintf("write a number, such as %s: 0.8", yamlLastKey(path)))
	default:
		return f, true
	}
	return 0, false
}

// flag reads true or false.
func (d *yamlDoc) flag(v *yaml.Node, path string) (bool, bool) {
	if !d.isKind(v, yaml.ScalarNode, path) {
		return false, false
	}
	v = yamlDeref(v)
	b, err := strconv.ParseBool(v.Value)
	if v.ShortTag() != "!!bool" || err != nil {
		d.add(v.Line, fmt.Sprintf("%s must be true or false, not %s", path, yamlDescribe(v)),
			fmt.Sprintf("write %s: true or %s: false", yamlLastKey(path), yamlLastKey(path)))
		return false, false
	}
	return b, true
}

// enum reads one of the given values.
func (d *yamlDoc) enum(v *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := d.text(v, path)
	if !ok {
		return "", false
	}
	if slices.Contains(values, s) {
		return s, true
	}
	key := yamlLastKey(path)
	alts := make([]string, len(values))
	for i, val := range values {
		alts[i] = key + ": " + val
	}
	fix := "write " + alts[0]
	if len(alts) > 1 {
		fix = "write " + strings.Join(alts[:len(alts)-1], ", ") + " or " + alts[len(alts)-1]
	}
	d.add(yamlDeref(v).Line, fmt.Sprintf("%s %q is not one of %s", path, s, strings.Join(values, ", ")), fix+didYouMean(s, values))
	return "", false
}

func yamlDeref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func yamlIsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func yamlIsMapping(n *yaml.Node) bool {
	n = yamlDeref(n)
	return n != nil && n.Kind == yaml.MappingNode
}

func yamlIsSeq(n *yaml.Node) bool { n = yamlDeref(n); return n != nil && n.Kind == yaml.SequenceNode }

func isBlankRune(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// yamlItemLine returns the line of the i-th entry of the sequence v.
func yamlItemLine(v *yaml.Node, i int) int {
	v = yamlDeref(v)
	if v != nil && i < len(v.Content) {
		return v.Content[i].Line
	}
	if v != nil {
		return v.Line
	}
	return 0
}

// yamlDescribe names what a node holds, for "must be X, not Y" messages; it never dumps Go types.
func yamlDescribe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	if yamlIsNull(n) {
		return "an empty value"
	}
	s := n.Value
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return strconv.Quote(s)
}

// didYouMean returns `; did you mean "X"?` for the closestName of options to got, or "" when none is close.
func didYouMean(got string, options []string) string {
	if best := closestName(got, options); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// closestName returns the first of options nearest to got within edit distance 2, other than got itself.
func closestName(got string, options []string) string {
	best, bestDist := "", 3
	for _, o := range options {
		if dist := levenshtein.ComputeDistance(got, o); dist < bestDist && o != got {
			best, bestDist = o, dist
		}
	}
	return best
}

// scriptPath resolves a script driver's script: against the capsule directory.
func scriptPath(dir, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(dir, name)
}

// unbuilt is a murmur.yaml declaration of something this build of mur does not provide yet.
type unbuilt struct{ key, what string }

// unbuiltDeclarations lists what c declares that this build does not provide yet (staging warns with
// W-CAP-030), in file order.
func (c *Capsule) unbuiltDeclarations() []unbuilt {
	var out []unbuilt
	if len(c.Tools) > 0 {
		out = append(out, unbuilt{"tools:", "tool artifacts"})
	}
	if len(c.Skills) > 0 {
		out = append(out, unbuilt{"skills:", "skills"})
	}
	if len(c.Capabilities.Spawn.Allow) > 0 {
		out = append(out, unbuilt{"capabilities.spawn.allow", "delegate-task"})
	}
	if c.Capabilities.Plan.Submit {
		out = append(out, unbuilt{"capabilities.plan.submit", "submit-plan"})
	}
	if i := c.Capabilities.Install; len(i.Tool)+len(i.Skill)+len(i.From) > 0 {
		out = append(out, unbuilt{"capabilities.install", "pull-artifact and remove-artifact"})
	}
	return out
}

// declaresUnbuilt reports whether c declares the grant of the runtime-provided tool name, which this
// build does not provide yet.
func (c *Capsule) declaresUnbuilt(name string) bool {
	switch name {
	case "delegate-task":
		return len(c.Capabilities.Spawn.Allow) > 0
	case "submit-plan":
		return c.Capabilities.Plan.Submit
	case "pull-artifact", "remove-artifact":
		i := c.Capabilities.Install
		return len(i.Tool)+len(i.Skill)+len(i.From) > 0
	}
	return false
}
