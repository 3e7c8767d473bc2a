package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
	"github.com/murmur-run/murmur/member/artifact/wit"
)

// ServedWITLevel is the WIT level this mur serves: an artifact asking for a higher one does not fit.
// Level 2 (DESIGN §18) lets a WebAssembly tool call manage_pull and a hook run_inference (package wit).
const ServedWITLevel = wit.Level

// ManifestFile is the name of an artifact's manifest in its directory.
const ManifestFile = "murmur.yaml"

// Runtime is an artifact's role.
type Runtime string

// The runtimes an artifact may have. Only tools and skills are ever pulled in a session.
const (
	RuntimeTool    Runtime = "tool"
	RuntimeSkill   Runtime = "skill"
	RuntimeHook    Runtime = "hook"
	RuntimeDriver  Runtime = "driver"
	RuntimeCapsule Runtime = "capsule"
)

// Implementation is what an artifact's payload is.
type Implementation string

// The implementations, and the key naming the payload each needs.
const (
	ImplWASM    Implementation = "wasm"    // module: a WASI preview-1 module
	ImplText    Implementation = "text"    // text: a UTF-8 file (a skill)
	ImplCommand Implementation = "command" // command: a program and its arguments (hooks, drivers)
	ImplCapsule Implementation = "capsule" // capsule: a directory holding a capsule's murmur.yaml
	ImplNative  Implementation = "native"  // the runtime-provided tools only; never an artifact's
)

// implsOf lists the implementations each runtime may have, the first being the usual one.
var implsOf = map[Runtime][]Implementation{
	RuntimeTool:    {ImplWASM},
	RuntimeSkill:   {ImplText},
	RuntimeHook:    {ImplWASM, ImplCommand},
	RuntimeDriver:  {ImplWASM, ImplCommand},
	RuntimeCapsule: {ImplCapsule},
}

// payloadKey is the key naming the payload of each implementation, and an example value.
var payloadKey = map[Implementation][2]string{
	ImplWASM:    {"module", "tool.wasm"},
	ImplText:    {"text", "SKILL.md"},
	ImplCommand: {"command", "[./policy.sh]"},
	ImplCapsule: {"capsule", "capsule"},
}

// Event is a moment a hook is called at.
type Event string

// The hook events.
const (
	EventToolCall Event = "on-tool-call"
	EventTaskEnd  Event = "on-task-end"
)

// MaxSkillBytes bounds a skill's text: all of it goes into every system prompt.
const MaxSkillBytes = 64 << 10

// maxManifestBytes bounds an artifact's murmur.yaml.
const maxManifestBytes = 1 << 20

// emptySchema is a tool's input schema when its manifest gives none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Manifest is an artifact's murmur.yaml.
type Manifest struct {
	Name           Name
	Version        string
	Runtime        Runtime
	Implementation Implementation
	Module         string   // ImplWASM: the module's path in the artifact directory
	Text           string   // ImplText: the text file's path in the artifact directory
	Command        []string // ImplCommand: the program and its arguments
	Capsule        string   // ImplCapsule: the capsule directory's path in the artifact directory
	Description    string
	WITLevel       int             // 1 when the file does not say
	InputSchema    json.RawMessage // tools: the JSON schema of the input; {"type":"object","properties":{}} when not given
	Events         []Event         // hooks

	file  string
	lines map[string]int // key -> line of the key
}

// Fits reports whether this mur serves the WIT level the artifact asks for.
func (m *Manifest) Fits() bool { return m.WITLevel <= ServedWITLevel }

// HostFunctions are the functions of the host module wit.Module a module of this role may import at WIT
// level 2 (DESIGN §18): a tool's and a hook's module may import all three, since a guest library (Go's
// included) imports them together; which one a run may call is decided when it calls (manage_pull during
// a tool's call, run_inference during a hook's run; the other is refused not-granted:). None for another
// role or a lower level.
func (m *Manifest) HostFunctions() []string {
	if m.WITLevel < wit.Level || (m.Runtime != RuntimeTool && m.Runtime != RuntimeHook) {
		return nil
	}
	return []string{wit.FnAnswer, wit.FnManagePull, wit.FnRunInference}
}

// CheckHostImports says what is wrong when the module's imports of the host module (imports, from
// wasm.HostImports) are more than its role and WIT level allow (HostFunctions): a level-1 artifact
// imports none.
func (m *Manifest) CheckHostImports(imports []string) error {
	allowed := m.HostFunctions()
	for _, fn := range imports {
		if slices.Contains(allowed, fn) {
			continue
		}
		if m.WITLevel < wit.Level {
			return fmt.Errorf("its module imports %s.%s, which WIT level %d serves, but its murmur.yaml says wit_level: %d; write wit_level: %d",
				wit.Module, fn, wit.Level, m.WITLevel, wit.Level)
		}
		return fmt.Errorf("its module imports %s.%s, which a %s artifact may not import", wit.Module, fn, m.Runtime)
	}
	return nil
}

// Line returns the line of the key in murmur.yaml, 0 when the file does not write it.
func (m *Manifest) Line(key string) int { return m.lines[key] }

const manifestExample = "name: scope/name, version: 1.0.0, runtime: tool, implementation: wasm and module: tool.wasm"

var manifestKeys = []string{"name", "version", "runtime", "implementation", "module", "text", "command", "capsule",
	"description", "wit_level", "input_schema", "events"}

// ParseManifest parses and validates data as the artifact murmur.yaml at path (named in errors as given).
// It checks the file alone; LoadDir also checks it against its directory and payload. Every problem is
// reported, joined, each an *Error in line order; a role that disagrees with its payload also matches
// ErrPayload.
func ParseManifest(path string, data []byte) (*Manifest, error) {
	d := &yamlDoc{Doc: yamldoc.Doc{File: path}}
	root := d.Root(data, manifestExample)
	if root == nil {
		return nil, d.Err()
	}
	m := &Manifest{WITLevel: 1, file: path, lines: map[string]int{}}
	vals := map[string]*yaml.Node{}
	fields := make([]yamldoc.Field, len(manifestKeys))
	for i, key := range manifestKeys {
		fields[i] = yamldoc.Field{Name: key, Fn: func(k, v *yaml.Node) { m.lines[key] = k.Line; vals[key] = v }}
	}
	d.Fields(root, "", fields)

	if v := vals["name"]; v != nil {
		if s, ok := d.Text(v, "name"); ok {
			if n, err := ParseName(s); err != nil {
				d.addNameError(v.Line, "name ", err)
			} else {
				m.Name = n
			}
		}
	} else {
		d.Missing(root.Line, "name", "name is missing", "add the artifact's full name, such as name: local/tool-edit")
	}
	if v := vals["version"]; v != nil {
		if s, ok := d.Text(v, "version"); ok {
			if err := checkVersion(s); err != nil {
				d.addNameError(v.Line, "version ", err)
			} else {
				m.Version = s
			}
		}
	} else {
		d.Missing(root.Line, "version", "version is missing", "add the artifact's version, such as version: 1.0.0")
	}
	runtimes := []string{string(RuntimeTool), string(RuntimeSkill), string(RuntimeHook), string(RuntimeDriver), string(RuntimeCapsule)}
	if v := vals["runtime"]; v != nil {
		if s, ok := d.Enum(v, "runtime", runtimes...); ok {
			m.Runtime = Runtime(s)
		}
	} else {
		d.Missing(root.Line, "runtime", "runtime is missing", "add what the artifact is: runtime: tool, skill, hook, driver or capsule")
	}
	if v := vals["description"]; v != nil {
		m.Description, _ = d.Text(v, "description")
	}
	if v := vals["wit_level"]; v != nil {
		if n, ok := d.CountInt(v, "wit_level"); ok {
			if n == 0 {
				d.Add(v.Line, "wit_level must be 1 or more, not 0", "write wit_level: 1, or wit_level: 2 for an artifact that imports the murmur host module")
			} else {
				m.WITLevel = n
			}
		}
	}
	m.implementation(d, root, vals)
	m.roleKeys(d, root, vals)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// implementation reads implementation: and the payload key it needs, once the runtime is known.
func (m *Manifest) implementation(d *yamlDoc, root *yaml.Node, vals map[string]*yaml.Node) {
	payload := func(line int, msg, fix string) {
		d.AddErr(line, &payloadError{&Error{File: d.File, Line: line, Msg: msg, Fix: fix}})
	}
	allowed := implsOf[m.Runtime]
	v := vals["implementation"]
	if v == nil {
		if m.Runtime != "" {
			d.Missing(root.Line, "implementation", "implementation is missing",
				fmt.Sprintf("add implementation: %s, with %s: %s", allowed[0], payloadKey[allowed[0]][0], payloadKey[allowed[0]][1]))
		}
	} else if s, ok := d.Enum(v, "implementation", "wasm", "text", "command", "capsule", "native"); ok {
		impl := Implementation(s)
		switch {
		case impl == ImplNative:
			d.Add(v.Line, "implementation native belongs to the runtime's own tools, never to an artifact",
				"write implementation: wasm, with module: tool.wasm")
		case m.Runtime != "" && !slices.Contains(allowed, impl):
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = "implementation: " + string(a)
			}
			payload(v.Line, fmt.Sprintf("a %s cannot have implementation %s", m.Runtime, impl), "write "+strings.Join(names, " or "))
		default:
			m.Implementation = impl
		}
	}
	// Each payload key is read when present; one that does not belong to the implementation is an error.
	for _, impl := range []Implementation{ImplWASM, ImplText, ImplCommand, ImplCapsule} {
		key := payloadKey[impl][0]
		pv := vals[key]
		if pv == nil {
			if m.Implementation == impl {
				payload(m.lines["implementation"], fmt.Sprintf("implementation %s needs %s, and it is missing", impl, key),
					fmt.Sprintf("add %s: %s", key, payloadKey[impl][1]))
			}
			continue
		}
		if m.Implementation != "" && m.Implementation != impl {
			d.Add(m.lines[key], fmt.Sprintf("%s is for implementation: %s, and this artifact's is %s", key, impl, m.Implementation),
				"remove "+key)
			continue
		}
		switch impl {
		case ImplWASM:
			m.Module, _ = d.localPath(pv, key)
		case ImplText:
			m.Text, _ = d.localPath(pv, key)
		case ImplCapsule:
			m.Capsule, _ = d.localPath(pv, key)
		case ImplCommand:
			if l, ok := d.Texts(pv, key); ok {
				if len(l) == 0 || l[0] == "" {
					d.Add(yamldoc.Deref(pv).Line, "command names no program", "write command: [./policy.sh] (the program, then its arguments)")
				} else {
					m.Command = l
				}
			}
		}
	}
}

// localPath reads a path inside the artifact directory.
func (d *yamlDoc) localPath(v *yaml.Node, key string) (string, bool) {
	s, ok := d.Text(v, key)
	if !ok {
		return "", false
	}
	if !filepath.IsLocal(s) || strings.Contains(s, `\`) {
		d.Add(yamldoc.Deref(v).Line, fmt.Sprintf("%s %q is not a path inside the artifact directory", key, s),
			fmt.Sprintf("write a relative path without .., such as %s: %s", key, payloadKeyExample(key)))
		return "", false
	}
	return filepath.ToSlash(filepath.Clean(s)), true
}

func payloadKeyExample(key string) string {
	for _, kv := range payloadKey {
		if kv[0] == key {
			return kv[1]
		}
	}
	return key
}

// roleKeys reads input_schema (tools) and events (hooks), refusing them on other runtimes.
func (m *Manifest) roleKeys(d *yamlDoc, root *yaml.Node, vals map[string]*yaml.Node) {
	if v := vals["input_schema"]; v != nil {
		if m.Runtime != "" && m.Runtime != RuntimeTool {
			d.Add(m.lines["input_schema"], fmt.Sprintf("input_schema is for runtime: tool, and this artifact is a %s", m.Runtime), "remove input_schema")
		} else if d.IsKind(v, yaml.MappingNode, "input_schema") {
			var b bytes.Buffer
			if d.json(&b, v, "input_schema") {
				if t := schemaType(v); t != "object" {
					d.Add(yamldoc.Deref(v).Line, "input_schema must describe an object (type: object), as a tool's input is one JSON object",
						"write input_schema: {type: object, properties: {path: {type: string}}}")
				} else {
					m.InputSchema = json.RawMessage(b.Bytes())
				}
			}
		}
	} else if m.Runtime == RuntimeTool {
		m.InputSchema = emptySchema
	}
	if v := vals["events"]; v != nil {
		if m.Runtime != "" && m.Runtime != RuntimeHook {
			d.Add(m.lines["events"], fmt.Sprintf("events is for runtime: hook, and this artifact is a %s", m.Runtime), "remove events")
		} else if l, ok := d.Texts(v, "events"); ok {
			seen := map[string]bool{}
			for i, s := range l {
				line := yamldoc.ItemLine(v, i)
				switch {
				case s != string(EventToolCall) && s != string(EventTaskEnd):
					d.Add(line, fmt.Sprintf("events[%d] %q is not a hook event", i, s),
						"write on-tool-call or on-task-end"+yamldoc.DidYouMean(s, []string{string(EventToolCall), string(EventTaskEnd)}))
				case seen[s]:
					d.Add(line, fmt.Sprintf("events lists %q twice", s), "remove one")
				default:
					seen[s] = true
					m.Events = append(m.Events, Event(s))
				}
			}
			if len(l) == 0 {
				d.AddErr(yamldoc.Deref(v).Line, &payloadError{&Error{File: d.File, Line: yamldoc.Deref(v).Line,
					Msg: "events is empty, so the hook would never be called", Fix: "write events: [on-tool-call], [on-task-end] or both"}})
			}
		}
	} else if m.Runtime == RuntimeHook {
		d.AddErr(root.Line, &payloadError{&Error{File: d.File, Line: root.Line,
			Msg: "a hook needs events, and they are missing", Fix: "add events: [on-tool-call], [on-task-end] or both"}})
	}
}

// schemaType returns the scalar value of a mapping's type: key, "" when it has none.
func schemaType(n *yaml.Node) string {
	n = yamldoc.Deref(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if yamldoc.Deref(n.Content[i]).Value == "type" {
			return yamldoc.Deref(n.Content[i+1]).Value
		}
	}
	return ""
}

// json writes the YAML value n as JSON, keys in the file's order, reporting what JSON cannot hold.
func (d *yamlDoc) json(b *bytes.Buffer, n *yaml.Node, path string) bool {
	n = yamldoc.Deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		ok := true
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamldoc.Deref(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
				d.Add(k.Line, fmt.Sprintf("a key in %s is %s", path, yamldoc.Describe(k)), "write plain names as keys")
				ok = false
				continue
			}
			if seen[k.Value] {
				d.Add(k.Line, fmt.Sprintf("key %q appears twice in %s", k.Value, path), "keep one of them")
				ok = false
				continue
			}
			seen[k.Value] = true
			if len(seen) > 1 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			ok = d.json(b, n.Content[i+1], path+"."+k.Value) && ok
		}
		b.WriteByte('}')
		return ok
	case yaml.SequenceNode:
		b.WriteByte('[')
		ok := true
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			ok = d.json(b, c, fmt.Sprintf("%s[%d]", path, i)) && ok
		}
		b.WriteByte(']')
		return ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			v, _ := strconv.ParseBool(n.Value)
			b.WriteString(strconv.FormatBool(v))
		case "!!int":
			v, err := strconv.ParseInt(n.Value, 0, 64)
			if err != nil {
				d.Add(n.Line, fmt.Sprintf("%s %s is not a number JSON can hold", path, n.Value), "write a smaller whole number")
				return false
			}
			b.WriteString(strconv.FormatInt(v, 10))
		case "!!float":
			v, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				d.Add(n.Line, fmt.Sprintf("%s %s is not a number JSON can hold", path, n.Value), "write a finite number")
				return false
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		case "!!str":
			s, _ := json.Marshal(n.Value)
			b.Write(s)
		default:
			d.Add(n.Line, fmt.Sprintf("%s holds a %s value, which JSON has no type for", path, n.ShortTag()), "write it as quoted text")
			return false
		}
		return true
	}
	d.Add(n.Line, fmt.Sprintf("%s holds %s", path, yamldoc.Describe(n)), "write plain YAML values")
	return false
}

// readManifest reads and parses dir's murmur.yaml.
func readManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := readRegular(path, maxManifestBytes)
	if err != nil {
		return nil, err
	}
	return ParseManifest(path, data)
}

// readRegular reads a regular file of at most limit bytes, refusing symbolic links and special files.
func readRegular(path string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{File: path, Msg: "the file is missing", Fix: "an artifact directory holds its murmur.yaml and its payload"}
	case err != nil:
		return nil, &Error{File: path, Msg: "cannot be read: " + errText(err), Fix: "make the file readable"}
	case !fi.Mode().IsRegular():
		return nil, &Error{File: path, Msg: "is " + describeMode(fi.Mode()) + ", not a regular file", Fix: "replace it with the file itself"}
	case fi.Size() > limit:
		return nil, &Error{File: path, Msg: fmt.Sprintf("is %d bytes, more than the %d this file may have", fi.Size(), limit), Fix: "shorten it"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot be read: " + errText(err), Fix: "make the file readable"}
	}
	return data, nil
}

// checkPayload checks that the files m names are in dir and are what their role needs.
func (m *Manifest) checkPayload(dir string) error {
	d := &yamlDoc{Doc: yamldoc.Doc{File: m.file}}
	payload := func(key, msg, fix string) {
		line := m.lines[key]
		d.AddErr(line, &payloadError{&Error{File: m.file, Line: line, Msg: msg, Fix: fix}})
	}
	file := func(key, rel string) (os.FileInfo, bool) {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			payload(key, fmt.Sprintf("%s %s is not in the artifact directory", key, rel), fmt.Sprintf("put the file there, or name the file that is (%s: %s)", key, payloadKeyExample(key)))
			return nil, false
		case err != nil:
			payload(key, fmt.Sprintf("%s %s cannot be read: %s", key, rel, errText(err)), "make it readable")
			return nil, false
		}
		return fi, true
	}
	regular := func(key, rel string) bool {
		fi, ok := file(key, rel)
		if ok && !fi.Mode().IsRegular() {
			payload(key, fmt.Sprintf("%s %s is %s, not a regular file", key, rel, describeMode(fi.Mode())), "replace it with the file itself")
			return false
		}
		return ok
	}
	switch m.Implementation {
	case ImplWASM:
		if regular("module", m.Module) {
			head := make([]byte, 8)
			f, err := os.Open(filepath.Join(dir, filepath.FromSlash(m.Module)))
			n := 0
			if err == nil {
				n, _ = f.Read(head)
				_ = f.Close() // only read
			}
			if !bytes.Equal(head[:n], []byte("\x00asm\x01\x00\x00\x00")) {
				payload("module", fmt.Sprintf("module %s is not a WebAssembly module: it does not start with \\0asm and version 1", m.Module),
					"build the module for WASI preview 1 (GOOS=wasip1 GOARCH=wasm go build -o "+m.Module+"), and name the .wasm file")
			}
		}
	case ImplText:
		if regular("text", m.Text) {
			data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(m.Text)))
			switch {
			case err != nil:
				payload("text", fmt.Sprintf("text %s cannot be read: %s", m.Text, errText(err)), "make it readable")
			case len(data) > MaxSkillBytes:
				payload("text", fmt.Sprintf("text %s is %d bytes, more than the %d a skill may add to the system prompt", m.Text, len(data), MaxSkillBytes), "shorten it")
			case !utf8.Valid(data):
				payload("text", fmt.Sprintf("text %s is not UTF-8 text", m.Text), "save it as UTF-8")
			}
		}
	case ImplCommand:
		if prog := m.Command[0]; strings.Contains(prog, "/") {
			if !filepath.IsLocal(prog) {
				payload("command", fmt.Sprintf("command's program %s is outside the artifact directory", prog),
					"name a program inside it (./policy.sh), or a program on the PATH by its bare name")
			} else {
				regular("command", prog)
			}
		}
	case ImplCapsule:
		if fi, ok := file("capsule", m.Capsule); ok {
			if !fi.IsDir() {
				payload("capsule", fmt.Sprintf("capsule %s is not a directory", m.Capsule), "name the directory holding the capsule's murmur.yaml")
			} else if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(m.Capsule), ManifestFile)); err != nil || !fi.Mode().IsRegular() {
				payload("capsule", fmt.Sprintf("capsule %s holds no murmur.yaml", m.Capsule), "put the capsule's murmur.yaml in it")
			}
		}
	}
	return d.Err()
}

func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// errText is an I/O error without the path the caller already names.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
