package staged

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/runtimetools"
)

// ToolSpecs is the tool array as sent, given the runtime-provided tools and shell binaries (base): each
// of those, where a tool artifact of the same name describes the name instead (SPEC: the shell manifest
// yields to it), then the other tool artifacts by name.
func (sa *Set) ToolSpecs(base []runtimetools.Manifest) []driver.ToolSpec {
	arts := sa.Tools()
	byName := map[string]*artifact.Artifact{}
	for _, a := range arts {
		byName[a.Manifest.Name.Tool()] = a
	}
	spec := func(a *artifact.Artifact) driver.ToolSpec {
		return driver.ToolSpec{Name: a.Manifest.Name.Tool(), Description: a.Manifest.Description, InputSchema: a.Manifest.InputSchema}
	}
	var out []driver.ToolSpec
	for _, m := range base {
		if a, ok := byName[m.Name]; ok {
			out = append(out, spec(a))
			delete(byName, m.Name)
			continue
		}
		out = append(out, driver.ToolSpec{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema})
	}
	for _, a := range arts {
		if _, ok := byName[a.Manifest.Name.Tool()]; ok {
			out = append(out, spec(a))
		}
	}
	return out
}

// manifestFile is the murmur.yaml staging writes for a runtime-provided tool.
type manifestFile struct {
	Name           string `yaml:"name"`
	Version        string `yaml:"version"`
	Runtime        string `yaml:"runtime"`
	Implementation string `yaml:"implementation"`
	Description    string `yaml:"description"`
	InputSchema    any    `yaml:"input_schema"`
}

// WriteManifests writes tools/<name>/murmur.yaml into the session's runtime directory for every staged
// runtime-provided tool, and nothing for a tool that was not granted, nor for a name a tool artifact of
// the Set holds: the artifact's own murmur.yaml is there, and the shell manifest yields to it (SPEC
// "Reserved names").
func (sa *Set) WriteManifests(runtimeDir string, manifests []runtimetools.Manifest) error {
	for _, m := range manifests {
		if sa.Holds(m.Name) {
			continue
		}
		body, err := manifestBodies.body(m)
		if err != nil {
			return err
		}
		dir := filepath.Join(runtimeDir, "tools", m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("staging %s: %w", m.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), body, 0o600); err != nil {
			return fmt.Errorf("staging %s: %w", m.Name, err)
		}
	}
	return nil
}

// manifestYAML is the murmur.yaml of manifest m.
func manifestYAML(m runtimetools.Manifest) ([]byte, error) {
	var schema any
	if err := json.Unmarshal(m.InputSchema, &schema); err != nil {
		return nil, fmt.Errorf("staging %s: its input schema is not JSON: %w", m.Name, err)
	}
	return yaml.Marshal(manifestFile{Name: m.Name, Version: m.Version, Runtime: m.Runtime,
		Implementation: m.Implementation, Description: m.Description, InputSchema: schema})
}

// manifestBodies is every session's memo of manifestYAML in this process.
var manifestBodies = &manifestMemo{bodies: map[string][]byte{}}

// manifestMemoMax bounds what manifestMemo keeps, keys and bodies together, in bytes.
const manifestMemoMax = 1 << 20

// manifestMemo keeps the murmur.yaml of the runtime-provided tools' manifests by their content: every
// member of a formation writes the same few (session-status, a shell binary's), and decoding each
// schema and encoding its YAML by reflection anew was a twentieth of the start of a formation of a
// thousand. What it answers is what manifestYAML would: a pure function of the key. Past
// manifestMemoMax bytes it keeps nothing more (a formation whose call-member manifests each list
// hundreds of peers), and those are encoded each time.
type manifestMemo struct {
	mu     sync.Mutex // guards bytes and bodies
	bytes  int
	bodies map[string][]byte // by memoKey; never modified once stored
}

// memoKey is m's content, its fields joined by NULs: none but the schema, which comes last, holds one.
func memoKey(m runtimetools.Manifest) string {
	return strings.Join([]string{m.Name, m.Version, m.Runtime, m.Implementation, m.Description, string(m.InputSchema)}, "\x00")
}

// body returns manifestYAML(m), from the memo when it holds it. The caller must not modify it.
func (mm *manifestMemo) body(m runtimetools.Manifest) ([]byte, error) {
	key := memoKey(m)
	mm.mu.Lock()
	body, ok := mm.bodies[key]
	mm.mu.Unlock()
	if ok {
		return body, nil
	}
	body, err := manifestYAML(m)
	if err != nil {
		return nil, err
	}
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if size := len(key) + len(body); mm.bytes+size <= manifestMemoMax {
		if _, ok := mm.bodies[key]; !ok {
			mm.bodies[key] = body
			mm.bytes += size
		}
	}
	return body, nil
}

// Inventory names every tool the model may call, given the runtime-provided tools and shell binaries
// (base): the names of ToolSpecs, in its order.
func (sa *Set) Inventory(base []runtimetools.Manifest) []string {
	out := []string{}
	for _, t := range sa.ToolSpecs(base) {
		out = append(out, t.Name)
	}
	return out
}

// Refresh re-reads the tool array and the system prompt (system) of req before an inference call:
// after a pull or removal (writing tools_refreshed for task), and every turn under inference.tool_refresh:
// every_turn.
func (sa *Set) Refresh(task string, base []runtimetools.Manifest, req *driver.InferRequest, system func() string) {
	added, removed := sa.Changes()
	changed := len(added)+len(removed) > 0
	if !changed && !sa.EveryTurn() {
		return
	}
	req.Tools = sa.ToolSpecs(base)
	req.System = system()
	if changed {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = sa.cfg.Recorder.Write(records.TypeToolsRefreshed, task, map[string]any{"trigger": "agent", "added": nonNil(added), "removed": nonNil(removed)})
	}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
