package capsule

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

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

// topKeys are the top-level keys the checks across keys look at, nil when the file does not write one.
type topKeys struct {
	name, inference, script, transport, harness, accept, queue, after *yaml.Node

	queueSet bool // queue_size holds a count
}

// top reads the top-level mapping: each key's block, then the checks that span keys, and the defaults.
func (p *capsuleParser) top(n *yaml.Node) {
	p.process = declaresProcess(n)
	var keys topKeys
	p.d.Fields(n, "", p.topFields(&keys))

	if keys.name == nil {
		p.d.Missing(n.Line, "name", "name is missing", "add the capsule's name, such as name: worker")
	}
	p.checkKind(n, &keys)
	if p.c.Transport == "" {
		p.c.Transport = TransportHTTP
	}
	p.processChecks(keys.harness, keys.transport, keys.script)
	p.checkAcceptance(&keys)
	p.checkAgentSettings(keys.inference)
}

// topFields are the top-level keys, each read into the capsule; keys records those the checks across
// keys need.
func (p *capsuleParser) topFields(keys *topKeys) []yamldoc.Field {
	d, c := p.d, p.c
	return []yamldoc.Field{
		{Name: "name", Fn: func(k, v *yaml.Node) { keys.name = k; p.name(v) }},
		{Name: "description", Fn: func(_, v *yaml.Node) { c.Description, _ = d.Text(v, "description") }},
		{Name: "instructions", Fn: func(_, v *yaml.Node) { c.Instructions, _ = d.Text(v, "instructions") }},
		{Name: "inference", Fn: func(k, v *yaml.Node) { keys.inference = k; c.Inference = p.inference(k, v) }},
		{Name: "script", Fn: func(k, v *yaml.Node) { keys.script = k; c.Script = p.script(k, v) }},
		{Name: "transport", Fn: func(k, v *yaml.Node) {
			keys.transport = k
			c.Transport, _ = d.Enum(v, "transport", TransportHTTP, TransportProcess)
		}},
		{Name: "harness", Fn: func(k, v *yaml.Node) { keys.harness = k; c.Harness = p.harness(v) }},
		{Name: "capabilities", Fn: func(_, v *yaml.Node) { p.capabilities(v) }},
		{Name: "exports", Fn: func(_, v *yaml.Node) { p.exports(v) }},
		{Name: "control", Fn: func(_, v *yaml.Node) { p.control(v) }},
		{Name: "push", Fn: func(_, v *yaml.Node) { p.push(v) }},
		{Name: "lifecycle", Fn: func(_, v *yaml.Node) { p.lifecycle(v) }},
		{Name: "deadline", Fn: func(_, v *yaml.Node) { p.deadline(v) }},
		{Name: "task_acceptance", Fn: func(k, v *yaml.Node) {
			keys.accept = k
			a, _ := d.Enum(v, "task_acceptance", string(AcceptReject), string(AcceptQueue))
			c.TaskAcceptance = Acceptance(a)
		}},
		{Name: "queue_size", Fn: func(k, v *yaml.Node) {
			keys.queue = k
			if p.queueSize(v) {
				keys.queueSet = true
			}
		}},
		{Name: "answers", Fn: func(_, v *yaml.Node) { c.Answers, _ = d.Enum(v, "answers", AnswersTask, AnswersMessage) }},
		{Name: "after_task", Fn: func(k, v *yaml.Node) {
			keys.after = k
			a, _ := d.Enum(v, "after_task", string(AfterTaskSleep))
			c.AfterTask = AfterTaskMode(a)
		}},
		{Name: "tools", Fn: func(_, v *yaml.Node) { c.Tools = p.artifacts(v, "tools", "local/bash or local/bash@1.2.0") }},
		{Name: "skills", Fn: func(_, v *yaml.Node) { c.Skills = p.artifacts(v, "skills", "local/style or local/style@1.0.0") }},
		{Name: "hooks", Fn: func(_, v *yaml.Node) { c.Hooks = p.artifacts(v, "hooks", "local/policy or local/policy@1.0.0") }},
		{Name: "store", Fn: func(_, v *yaml.Node) { p.store(v) }},
	}
}

func (p *capsuleParser) name(v *yaml.Node) {
	if s, ok := p.d.Text(v, "name"); ok {
		p.c.Name = s
		if strings.TrimSpace(s) == "" {
			p.d.Add(v.Line, "name is empty", "write the capsule's name, such as name: worker")
		}
	}
}

// deadline reads deadline: the session's own deadline, a duration of 0 or more.
func (p *capsuleParser) deadline(v *yaml.Node) {
	d := p.d
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
		p.c.Deadline = dur
	}
}

// queueSize reads queue_size and reports whether it holds a count (0 is one, and an error).
func (p *capsuleParser) queueSize(v *yaml.Node) bool {
	n, ok := p.d.CountInt(v, "queue_size")
	if !ok {
		return false
	}
	p.c.QueueSize = n
	if n == 0 {
		p.d.Add(v.Line, "queue_size is 0, so no task could ever wait", "write at least 1, such as queue_size: 16, or remove the key for the default of 16")
	}
	return true
}

// checkKind checks that the capsule is one kind: an agent (inference:) or a script capsule (script:), or
// a harness under transport: process.
func (p *capsuleParser) checkKind(n *yaml.Node, keys *topKeys) {
	switch {
	case keys.inference != nil && keys.script != nil:
		p.d.Add(keys.script.Line, fmt.Sprintf("script: is for script capsules, but this capsule has inference: (line %d)", keys.inference.Line),
			"remove script: for an agent capsule, or remove inference: for a script capsule")
		p.c.Script = nil
	case keys.inference == nil && keys.script == nil && !p.process:
		p.d.Add(n.Line, "the capsule has neither inference: nor script:",
			"add inference: for an agent capsule run by a model, or script: {command: [./answer.sh]} for a script capsule that runs a program per task")
	}
}

// checkAcceptance fills in task_acceptance's default and checks the keys that need task_acceptance: queue.
func (p *capsuleParser) checkAcceptance(keys *topKeys) {
	d, c := p.d, p.c
	if c.TaskAcceptance == "" {
		c.TaskAcceptance = AcceptReject
	}
	if c.TaskAcceptance == AcceptQueue {
		if !keys.queueSet {
			c.QueueSize = DefaultQueueSize
		}
		return
	}
	if keys.queueSet {
		d.Add(keys.queue.Line, "queue_size applies only with task_acceptance: queue",
			"add task_acceptance: queue, or remove queue_size")
	}
	if c.AfterTask == AfterTaskSleep {
		fix := "add task_acceptance: queue, or remove after_task"
		if keys.accept != nil {
			fix = fmt.Sprintf("set task_acceptance: queue (line %d), or remove after_task", keys.accept.Line)
		}
		d.Add(keys.after.Line, "after_task: sleep needs task_acceptance: queue", fix)
	}
}
