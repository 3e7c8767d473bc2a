package artifact

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseManifestTool(t *testing.T) {
	m, err := ParseManifest("murmur.yaml", []byte(`name: local/tool-edit
version: 1.2.0
runtime: tool
implementation: wasm
module: bin/tool.wasm
description: Edits a file in the workdir
input_schema:
  type: object
  properties:
    path: {type: string, description: "the file"}
    line: {type: integer, minimum: 1}
    dry: {type: boolean, default: false}
  required: [path]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"path":{"type":"string","description":"the file"},"line":{"type":"integer","minimum":1},"dry":{"type":"boolean","default":false}},"required":["path"]}`
	if string(m.InputSchema) != want {
		t.Errorf("input schema\n got %s\nwant %s", m.InputSchema, want)
	}
	if m.Name != "local/tool-edit" || m.Version != "1.2.0" || m.Runtime != RuntimeTool || m.Implementation != ImplWASM ||
		m.Module != "bin/tool.wasm" || m.WITLevel != 1 || !m.Fits() || m.Line("module") != 5 {
		t.Errorf("manifest = %+v", m)
	}
}

func TestParseManifestDefaults(t *testing.T) {
	m, err := ParseManifest("murmur.yaml", []byte("name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\nwit_level: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.InputSchema) != `{"type":"object","properties":{}}` || m.WITLevel != 3 || m.Fits() {
		t.Errorf("schema %s, wit %d, fits %v", m.InputSchema, m.WITLevel, m.Fits())
	}
	h, err := ParseManifest("murmur.yaml", []byte("name: local/h\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./policy.sh, --strict]\nevents: [on-tool-call, on-task-end]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"./policy.sh", "--strict"}, h.Command); diff != "" || len(h.Events) != 2 || h.InputSchema != nil {
		t.Errorf("hook %+v %s", h, diff)
	}
}

// TestParseManifestErrors checks every message byte for byte, with its line.
func TestParseManifestErrors(t *testing.T) {
	const f = "art/murmur.yaml"
	for _, tc := range []struct {
		name, yaml string
		want       []string
		payload    bool // a role/payload disagreement among them
	}{
		{"empty", "", []string{f + ":1: the file is empty; write name: scope/name, version: 1.0.0, runtime: tool, implementation: wasm and module: tool.wasm"}, false},
		{"not a mapping", "- a\n", []string{f + `:1: the file must be a mapping of keys, not a list; write name: scope/name, version: 1.0.0, runtime: tool, implementation: wasm and module: tool.wasm`}, false},
		{"syntax", "name: [a\n", []string{f + `:1: not valid YAML: did not find expected ',' or ']'; fix the syntax there: indent with spaces only, and quote text that holds ": " or starts with one of {[*&!|>%@'"`}, false},
		{"unknown key with did-you-mean, and the misspelt key is not also missing",
			"name: local/t\nversoin: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\n",
			[]string{f + `:2: unknown key "versoin" at the top level; known keys: name, version, runtime, implementation, module, text, command, capsule, description, wit_level, input_schema, events; did you mean "version"?`}, false},
		{"missing keys", "description: x\n", []string{
			f + ":1: name is missing; add the artifact's full name, such as name: local/tool-edit",
			f + ":1: version is missing; add the artifact's version, such as version: 1.0.0",
			f + ":1: runtime is missing; add what the artifact is: runtime: tool, skill, hook, driver or capsule"}, false},
		{"bad values", "name: tool-edit\nversion: 1.0\nruntime: tools\nimplementation: wasm\nmodule: ../t.wasm\nwit_level: one\n", []string{
			f + `:1: name "tool-edit" is not a full artifact name: it has no scope; write scope/name, such as local/tool-edit`,
			f + `:2: version "1.0" is not a full semantic version; write MAJOR.MINOR.PATCH, such as 1.0.0`,
			f + `:3: runtime "tools" is not one of tool, skill, hook, driver, capsule; write runtime: tool, runtime: skill, runtime: hook, runtime: driver or runtime: capsule; did you mean "tool"?`,
			f + `:5: module "../t.wasm" is not a path inside the artifact directory; write a relative path without .., such as module: tool.wasm`,
			f + `:6: wit_level must be a whole number, not "one"; write a whole number, such as wit_level: 1`}, false},
		{"wrong types", "name: [a]\nversion: {x: 1}\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\ndescription:\n  - a\nwit_level: \"2\"\n", []string{
			f + `:1: name must be a single value, not a list; write the value on the same line, such as name: value (quote text that holds ": ")`,
			f + `:2: version must be a single value, not a mapping; write the value on the same line, such as version: value (quote text that holds ": ")`,
			f + `:7: description must be a single value, not a list; write the value on the same line, such as description: value (quote text that holds ": ")`,
			f + `:8: wit_level must be a whole number, not the quoted text "2"; remove the quotes: wit_level: 2`}, false},
		{"wit level 0", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\nwit_level: 0\n",
			[]string{f + ":6: wit_level must be 1 or more, not 0; write wit_level: 1, or wit_level: 2 for an artifact that imports the murmur host module"}, false},
		{"tool without module", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\n",
			[]string{f + ":4: implementation wasm needs module, and it is missing; add module: tool.wasm"}, true},
		{"tool with a skill's implementation", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: text\ntext: SKILL.md\n", []string{
			f + ":4: a tool cannot have implementation text; write implementation: wasm"}, true},
		{"skill with a module", "name: local/s\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\nmodule: x.wasm\ninput_schema: {type: object}\n", []string{
			f + ":6: module is for implementation: wasm, and this artifact's is text; remove module",
			f + ":7: input_schema is for runtime: tool, and this artifact is a skill; remove input_schema"}, false},
		{"native", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: native\n", []string{
			f + ":4: implementation native belongs to the runtime's own tools, never to an artifact; write implementation: wasm, with module: tool.wasm"}, false},
		{"missing implementation", "name: local/s\nversion: 1.0.0\nruntime: skill\n", []string{
			f + ":1: implementation is missing; add implementation: text, with text: SKILL.md"}, false},
		{"hook without events", "name: local/h\nversion: 1.0.0\nruntime: hook\nimplementation: wasm\nmodule: h.wasm\n", []string{
			f + ":1: a hook needs events, and they are missing; add events: [on-tool-call], [on-task-end] or both"}, true},
		{"bad events", "name: local/h\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: []\nevents: [on-tool-cal, on-task-end, on-task-end]\n", []string{
			f + ":5: command names no program; write command: [./policy.sh] (the program, then its arguments)",
			f + `:6: events[0] "on-tool-cal" is not a hook event; write on-tool-call or on-task-end; did you mean "on-tool-call"?`,
			f + `:6: events lists "on-task-end" twice; remove one`}, false},
		{"events on a tool", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\nevents: [on-tool-call]\n", []string{
			f + ":6: events is for runtime: hook, and this artifact is a tool; remove events"}, false},
		{"schema not an object", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\ninput_schema:\n  type: string\n", []string{
			f + ":7: input_schema must describe an object (type: object), as a tool's input is one JSON object; write input_schema: {type: object, properties: {path: {type: string}}}"}, false},
		{"schema with what JSON cannot hold", "name: local/t\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\ninput_schema:\n  type: object\n  default: .nan\n  ? [a]\n  : 1\n", []string{
			f + ":8: input_schema.default .nan is not a number JSON can hold; write a finite number",
			f + ":9: a key in input_schema is a list; write plain names as keys"}, false},
		{"duplicate key", "name: local/t\nname: local/u\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: t.wasm\n", []string{
			f + `:2: key "name" appears twice at the top level (first at line 1); keep one of them`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseManifest(f, []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(strings.Join(tc.want, "\n"), err.Error()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if isPayload(err) != tc.payload {
				t.Errorf("isPayload = %v, want %v", isPayload(err), tc.payload)
			}
		})
	}
}

// TestLoadDirPayload checks a directory against its manifest: the role's payload, the name and version
// against where it is.
func TestLoadDirPayload(t *testing.T) {
	store := t.TempDir()
	good := putTool(t, store, "local/echo", "1.0.0", 1)
	a, err := LoadDir(good, Ref{"local/echo", "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := Digest(good); a.Digest != d || !a.Fits() || a.Ref().String() != "local/echo@1.0.0" {
		t.Errorf("artifact %+v", a)
	}

	f := filepath.Join(good, "murmur.yaml")
	for _, tc := range []struct {
		name    string
		change  func(dir string)
		want    string
		payload bool
	}{
		{"module missing", func(dir string) { os.Remove(filepath.Join(dir, "tool.wasm")) },
			f + ":5: module tool.wasm is not in the artifact directory; put the file there, or name the file that is (module: tool.wasm)", true},
		{"module not wasm", func(dir string) { writeFiles(t, dir, map[string]string{"tool.wasm": "#!/bin/sh\n"}) },
			f + `:5: module tool.wasm is not a WebAssembly module: it does not start with \0asm and version 1; build the module for WASI preview 1 (GOOS=wasip1 GOARCH=wasm go build -o tool.wasm), and name the .wasm file`, true},
		{"module a directory", func(dir string) {
			os.Remove(filepath.Join(dir, "tool.wasm"))
			os.Mkdir(filepath.Join(dir, "tool.wasm"), 0o755)
		},
			f + ":5: module tool.wasm is a directory, not a regular file; replace it with the file itself", true},
		{"name mismatch", func(dir string) {
			writeFiles(t, dir, map[string]string{"murmur.yaml": toolManifest("local/other", "1.0.0", 1)})
		},
			f + ":1: name local/other does not match the directory it is in, local/echo@1.0.0; write name: local/echo, or put the artifact where local/other belongs", false},
		{"version mismatch", func(dir string) {
			writeFiles(t, dir, map[string]string{"murmur.yaml": toolManifest("local/echo", "1.0.1", 1)})
		},
			f + ":2: version 1.0.1 does not match the directory it is in, local/echo@1.0.0; write version: 1.0.0, or put the artifact where version 1.0.1 belongs", false},
		{"no manifest", func(dir string) { os.Remove(filepath.Join(dir, "murmur.yaml")) },
			f + ": the file is missing; an artifact directory holds its murmur.yaml and its payload", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(good)
			putTool(t, store, "local/echo", "1.0.0", 1)
			tc.change(good)
			_, err := LoadDir(good, Ref{"local/echo", "1.0.0"})
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if isPayload(err) != tc.payload || errors.Is(err, ErrPayload) != tc.payload {
				t.Errorf("payload = %v, want %v", isPayload(err), tc.payload)
			}
		})
	}
}

func TestLoadDirSkill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "local", "style", "1.0.0")
	writeFiles(t, dir, map[string]string{
		"murmur.yaml": "name: local/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n",
		"SKILL.md":    "Write short sentences.\n",
	})
	a, err := LoadDir(dir, Ref{"local/style", "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadSkill(a, OriginOperator)
	if err != nil || s.Text != "Write short sentences.\n" {
		t.Fatalf("skill %+v, %v", s, err)
	}
	writeFiles(t, dir, map[string]string{"SKILL.md": "\xff\xfe"})
	_, err = LoadDir(dir, Ref{"local/style", "1.0.0"})
	want := filepath.Join(dir, "murmur.yaml") + ":5: text SKILL.md is not UTF-8 text; save it as UTF-8"
	if err == nil || err.Error() != want || !errors.Is(err, ErrPayload) {
		t.Errorf("err = %v, want %s", err, want)
	}
	writeFiles(t, dir, map[string]string{"SKILL.md": strings.Repeat("x", MaxSkillBytes+1)})
	_, err = LoadDir(dir, Ref{"local/style", "1.0.0"})
	want = filepath.Join(dir, "murmur.yaml") + ":5: text SKILL.md is 65537 bytes, more than the 65536 a skill may add to the system prompt; shorten it"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// A module may import the host module's functions only at WIT level 2, and only as a tool or a hook.
func TestCheckHostImports(t *testing.T) {
	all := []string{"answer", "manage_pull", "run_inference"}
	for _, tt := range []struct {
		runtime Runtime
		level   int
		imports []string
		want    string // "" when allowed
	}{
		{RuntimeTool, 1, nil, ""},
		{RuntimeTool, 1, []string{"manage_pull"}, "its module imports murmur.manage_pull, which WIT level 2 serves, but its murmur.yaml says wit_level: 1; write wit_level: 2"},
		{RuntimeHook, 1, []string{"answer", "run_inference"}, "its module imports murmur.answer, which WIT level 2 serves, but its murmur.yaml says wit_level: 1; write wit_level: 2"},
		{RuntimeTool, 2, all, ""},
		{RuntimeHook, 2, all, ""},
		{RuntimeHook, 2, nil, ""},
		{RuntimeDriver, 2, []string{"run_inference"}, "its module imports murmur.run_inference, which a driver artifact may not import"},
	} {
		m := &Manifest{Runtime: tt.runtime, WITLevel: tt.level}
		err := m.CheckHostImports(tt.imports)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s level %d importing %v: %q, want %q", tt.runtime, tt.level, tt.imports, got, tt.want)
		}
	}
}
