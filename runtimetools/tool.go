package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/murmur-run/murmur/member/records"
)

// Manifest is what staging writes to tools/<name>/murmur.yaml for a runtime-provided tool.
type Manifest struct {
	Name           string          `yaml:"name" json:"name"`
	Version        string          `yaml:"version" json:"version"`
	Runtime        string          `yaml:"runtime" json:"runtime"`
	Implementation string          `yaml:"implementation" json:"implementation"`
	Description    string          `yaml:"description" json:"description"`
	InputSchema    json.RawMessage `yaml:"-" json:"input_schema"`
}

// NativeManifest returns the manifest of a runtime-provided tool: version 0.0.0, runtime tool,
// implementation native, as SPEC fixes for all of them.
func NativeManifest(name, description string, schema json.RawMessage) Manifest {
	return Manifest{Name: name, Version: "0.0.0", Runtime: "tool", Implementation: "native",
		Description: description, InputSchema: schema}
}

// Call is one tool call of the model.
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage
	Task  string // the id of the task whose turn made the call
}

// Recorder writes one record to the session's trace.jsonl.
type Recorder interface {
	Write(typ records.Type, task string, fields map[string]any) error
}

// The statuses a result can have.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusRefused = "refused"
)

// Result is what a tool returns: the output the model sees inside the untrusted fence, structured data,
// and the runtime's note, which the model sees on the line after the fence.
type Result struct {
	Status  string
	Output  string
	Data    any
	Note    string
	Summary string // one line for logs and records, such as "Called worker: started"
}

// Refused returns a refused result carrying msg.
func Refused(msg string) Result { return Result{Status: StatusRefused, Output: msg} }

// Tool is one runtime-provided tool.
type Tool interface {
	Manifest() Manifest
	Run(ctx context.Context, call Call) (Result, error)
}

// Every tool of this package is a Tool: the runtime-provided ones in Gates' order, then a shell binary's.
var (
	_ Tool = (*ShareFile)(nil)
	_ Tool = (*FetchPeerFile)(nil)
	_ Tool = (*DelegateTask)(nil)
	_ Tool = (*SubmitPlan)(nil)
	_ Tool = (*SwitchDriver)(nil)
	_ Tool = (*CallMember)(nil)
	_ Tool = (*EndWithoutAnswer)(nil)
	_ Tool = (*PullArtifact)(nil)
	_ Tool = (*RemoveArtifact)(nil)
	_ Tool = (*SessionStatus)(nil)
	_ Tool = (*BackgroundCommand)(nil)
	_ Tool = (*Shell)(nil)
)

// Registry holds the tools staged for one session, in inventory order.
type Registry struct {
	tools map[string]Tool
	order []string
}

// NewRegistry returns a registry of tools. Two tools of the same name are a programming error.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		name := t.Manifest().Name
		if _, dup := r.tools[name]; dup {
			return nil, fmt.Errorf("runtimetools: two tools named %q", name)
		}
		r.tools[name] = t
		r.order = append(r.order, name)
	}
	return r, nil
}

// Lookup returns the staged tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Manifests returns the manifests of every staged tool, in inventory order.
func (r *Registry) Manifests() []Manifest {
	out := make([]Manifest, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.tools[n].Manifest())
	}
	return out
}

// Names returns the staged tool names, in inventory order.
func (r *Registry) Names() []string { return append([]string{}, r.order...) }

// Gate is the declaration a runtime-provided tool exists under (SPEC "The twelve", "Gated on").
type Gate struct {
	Tool        string
	Declaration string
}

// Gates lists the eleven named runtime-provided tools and their grants, in SPEC's order.
func Gates() []Gate {
	return []Gate{
		{"share-file", "exports.peer_files"},
		{"fetch-peer-file", "capabilities.peer_fetch"},
		{"delegate-task", "capabilities.spawn.allow"},
		{"submit-plan", "capabilities.plan.submit"},
		{"switch-driver", "control.agent_settings: [inference.driver]"},
		{"call-member", "a reach rule in roster.yaml that lets this member call another"},
		{"end-without-answer", "a reach rule in roster.yaml that lets this member call another"},
		{"pull-artifact", "capabilities.install, under transport: http"},
		{"remove-artifact", "capabilities.install, under transport: http"},
		{"session-status", "an inference: block"},
		{"background-command", "an inference: block, a non-empty capabilities.shell.allow and lifecycle.shell_grace_secs"},
	}
}

// Reserved reports whether name, or the part of an artifact name after its '/', is one of the eleven
// reserved runtime-provided tool names.
func Reserved(name string) bool {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	for _, g := range Gates() {
		if g.Tool == name {
			return true
		}
	}
	return false
}

// Unstaged returns the refusal for a call naming a tool that is not in the session's inventory. For a
// runtime-provided tool it names the declaration that is missing; for any other name it says how a
// shell binary or an artifact of that name would be granted, and lists what can be called.
func Unstaged(name string, inventory []string) string {
	for _, g := range Gates() {
		if g.Tool == name {
			return fmt.Sprintf("%s is not available in this session: it exists only when the capsule declares %s, and this capsule does not.", name, g.Declaration)
		}
	}
	have := "none"
	if len(inventory) > 0 {
		s := slices.Clone(inventory)
		sort.Strings(s)
		have = strings.Join(s, ", ")
	}
	return fmt.Sprintf("no tool named %q in this session: a shell binary needs capabilities.shell.allow, an artifact needs tools: in murmur.yaml. Tools you can call: %s.", name, have)
}
