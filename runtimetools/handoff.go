package runtimetools

import (
	"encoding/json"
	"fmt"
)

// handoff is what call-member and delegate-task share: each hands one task over, to a formation member or
// to a sub-capsule, and takes {"<to>": "<name>", "task": "<text>"}, both required.
type handoff struct {
	tool            string // call-member or delegate-task
	to              string // the field naming where the task goes: member or capsule
	description     string // the manifest's description
	toDescription   string // the to field's description
	taskDescription string // the task field's description
}

// manifest is the tool's manifest, names being the enum of the to field.
func (h handoff) manifest(names []string) Manifest {
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			h.to:   map[string]any{"type": "string", "enum": names, "description": h.toDescription},
			"task": map[string]any{"type": "string", "description": h.taskDescription},
		},
		"required": []string{h.to, "task"},
	})
	return NativeManifest(h.tool, h.description, schema)
}

// input reads a call's input as a struct with the fields to and task (both *string) would be read; bad is
// the refusal when the input is no such object or either field is missing.
func (h handoff) input(input json.RawMessage) (name, task, bad string) {
	var in struct {
		Member  json.RawMessage `json:"member"`
		Capsule json.RawMessage `json:"capsule"`
		Task    *string         `json:"task"`
	}
	raw := &in.Member
	if h.to == "capsule" {
		raw = &in.Capsule
	}
	var target *string
	if json.Unmarshal(input, &in) != nil || *raw == nil || json.Unmarshal(*raw, &target) != nil ||
		target == nil || in.Task == nil {
		return "", "", fmt.Sprintf(`'%s' needs {"%s": "<name>", "task": "<text>"}, both required.`, h.tool, h.to)
	}
	return *target, *in.Task, ""
}
