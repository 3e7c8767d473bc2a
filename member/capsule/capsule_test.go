package capsule

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseCapsuleErrors checks that every problem of a bad murmur.yaml is reported, each with its file,
// its line, what is wrong and what to write instead, as a *Error.
func TestParseCapsuleErrors(t *testing.T) {
	const path = "/w/murmur.yaml"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "a quote left open from the first line is named there, not past the file's end",
			yaml: "name: 'w\nscript: {command: [a]}\n\n",
			want: []string{
				`/w/murmur.yaml:1: not valid YAML: found unexpected end of stream; fix the syntax there: indent with spaces only, and quote text that holds ": " or starts with one of {[*&!|>%@'"`,
			},
		},
		{
			name: "unknown key in inference",
			yaml: `name: w
inference:
  driver: local
  choices:
    local: {driver: script}
  max_turn: 5
`,
			want: []string{
				`/w/murmur.yaml:6: unknown key "max_turn" in inference; known keys: driver, choices, max_turns, max_session_tokens, compaction, tool_refresh; did you mean "max_turns"?`,
			},
		},
		{
			name: "wrong type for max_turns",
			yaml: `name: w
inference:
  driver: local
  choices: {local: {driver: script}}
  max_turns: lots
`,
			want: []string{
				`/w/murmur.yaml:5: inference.max_turns must be a whole number, not "lots"; write a whole number of 0 or more, such as max_turns: 10`,
			},
		},
		{
			name: "inference key at the top level",
			yaml: `name: w
max_turns: 5
script: {command: [a]}
`,
			want: []string{
				`/w/murmur.yaml:2: unknown key "max_turns" at the top level; max_turns belongs under inference:; move it there, as inference.max_turns`,
			},
		},
		{
			name: "name missing",
			yaml: `description: x
script: {command: [a]}
`,
			want: []string{
				`/w/murmur.yaml:1: name is missing; add the capsule's name, such as name: worker`,
			},
		},
		{
			name: "neither inference nor script",
			yaml: `name: w
`,
			want: []string{
				`/w/murmur.yaml:1: the capsule has neither inference: nor script:; add inference: for an agent capsule run by a model, or script: {command: [./answer.sh]} for a script capsule that runs a program per task`,
			},
		},
		{
			name: "both inference and script",
			yaml: `name: w
script: {command: [a]}
inference: {driver: l, choices: {l: {driver: script}}}
`,
			want: []string{
				`/w/murmur.yaml:2: script: is for script capsules, but this capsule has inference: (line 3); remove script: for an agent capsule, or remove inference: for a script capsule`,
			},
		},
		{
			name: "empty script command",
			yaml: `name: w
script: {command: []}
`,
			want: []string{
				`/w/murmur.yaml:2: script.command is empty; name the program and its arguments, such as command: [./answer.sh]`,
			},
		},
		{
			name: "driver names no declared choice",
			yaml: `name: w
inference:
  driver: gtp
  choices:
    local: {driver: script}
    gpt: {driver: openai, model: m}
`,
			want: []string{
				`/w/murmur.yaml:3: inference.driver "gtp" names no declared choice; declared choices: local, gpt; did you mean "gpt"?`,
			},
		},
		{
			name: "unknown choice driver",
			yaml: `name: w
inference:
  driver: x
  choices:
    x: {driver: llama}
`,
			want: []string{
				`/w/murmur.yaml:5: inference.choices.x.driver "llama" is not one of script, openai, anthropic; write driver: script, driver: openai or driver: anthropic`,
			},
		},
		{
			name: "openai without model",
			yaml: `name: w
inference:
  driver: x
  choices:
    x: {driver: openai}
`,
			want: []string{
				`/w/murmur.yaml:5: inference.choices.x uses driver openai but names no model; add the model, such as model: gpt-4.1-mini`,
			},
		},
		{
			name: "credential not env or file",
			yaml: `name: w
inference:
  driver: x
  choices:
    x: {driver: openai, model: m, credential: sk-12345}
`,
			want: []string{
				`/w/murmur.yaml:5: inference.choices.x.credential is neither env:NAME nor file:PATH; write credential: env:OPENAI_API_KEY to read the key from the environment, or credential: file:/run/secrets/key to read it from a file; never write the key itself in murmur.yaml`,
			},
		},
		{
			name: "script file missing",
			yaml: `name: w
inference:
  driver: x
  choices:
    x: {driver: script, script: nope.yaml}
`,
			want: []string{
				`/w/murmur.yaml:5: inference.choices.x.script "nope.yaml" does not exist (looked for /w/nope.yaml); create it, write its path relative to the capsule directory, or remove script: to use the embedded default`,
			},
		},
		{
			name: "enums",
			yaml: `name: w
script: {command: [a]}
transport: grpc
task_acceptance: queu
after_task: sleep
`,
			want: []string{
				`/w/murmur.yaml:3: transport "grpc" is not one of http, process; write transport: http or transport: process`,
				`/w/murmur.yaml:4: task_acceptance "queu" is not one of reject, queue; write task_acceptance: reject or task_acceptance: queue; did you mean "queue"?`,
				`/w/murmur.yaml:5: after_task: sleep needs task_acceptance: queue; set task_acceptance: queue (line 4), or remove after_task`,
			},
		},
		{
			name: "sleep needs queue",
			yaml: `name: w
script: {command: [a]}
after_task: sleep
`,
			want: []string{
				`/w/murmur.yaml:3: after_task: sleep needs task_acceptance: queue; add task_acceptance: queue, or remove after_task`,
			},
		},
		{
			name: "tool_refresh and threshold",
			yaml: `name: w
inference:
  driver: x
  choices: {x: {driver: script}}
  tool_refresh: always
  compaction: {threshold: 1.5}
`,
			want: []string{
				`/w/murmur.yaml:5: inference.tool_refresh "always" is not one of every_turn, on_change; write tool_refresh: every_turn or tool_refresh: on_change`,
				`/w/murmur.yaml:6: inference.compaction.threshold must be more than 0 and at most 1, not 1.5; write the fraction of the context budget at which compaction fires, such as threshold: 0.8`,
			},
		},
		{
			name: "deadline does not parse",
			yaml: `name: w
script: {command: [a]}
deadline: 2 hours
`,
			want: []string{
				`/w/murmur.yaml:3: deadline "2 hours" is not a duration; write a number with a unit, such as deadline: 2h, deadline: 90m or deadline: 45s`,
			},
		},
		{
			name: "shell allow not bare",
			yaml: `name: w
script: {command: [a]}
capabilities:
  shell: {allow: [ls, /bin/cat, "grep -r"]}
`,
			want: []string{
				`/w/murmur.yaml:4: capabilities.shell.allow entry "/bin/cat" is not a bare program name; write the name alone, such as cat: the runtime finds it on PATH, and the model passes arguments with each call`,
				`/w/murmur.yaml:4: capabilities.shell.allow entry "grep -r" is not a bare program name; write the name alone, such as grep: the runtime finds it on PATH, and the model passes arguments with each call`,
			},
		},
		{
			name: "shell read and network",
			yaml: `name: w
script: {command: [a]}
capabilities:
  shell:
    read: [/etc, no-such-dir, ""]
    network: maybe
`,
			want: []string{
				`/w/murmur.yaml:5: capabilities.shell.read entry "no-such-dir" does not exist (looked for /w/no-such-dir); create it, write its path absolute or relative to the capsule directory, or remove the entry`,
				`/w/murmur.yaml:5: capabilities.shell.read[2] is empty; remove the empty entry`,
				`/w/murmur.yaml:6: capabilities.shell.network must be true or false, not "maybe"; write network: true or network: false`,
			},
		},
		{
			name: "artifact names",
			yaml: `name: w
script: {command: [a]}
tools: [bash, local/bash, Local/X@1, local/bash]
`,
			want: []string{
				`/w/murmur.yaml:3: tools entry "bash" is not an artifact name; write scope/name or scope/name@version in lowercase, such as local/bash or local/bash@1.2.0`,
				`/w/murmur.yaml:3: tools entry "Local/X@1" is not an artifact name; write scope/name or scope/name@version in lowercase, such as local/bash or local/bash@1.2.0`,
				`/w/murmur.yaml:3: tools lists "local/bash" twice (first at line 3); remove one`,
			},
		},
		{
			name: "negative numbers",
			yaml: `name: w
script: {command: [a], timeout_secs: -5}
lifecycle: {max_task_reopens: -1}
`,
			want: []string{
				`/w/murmur.yaml:2: script.timeout_secs must be 0 or more, not -5; write a whole number of 0 or more, such as timeout_secs: 10`,
				`/w/murmur.yaml:3: lifecycle.max_task_reopens must be 0 or more, not -1; write a whole number of 0 or more, such as max_task_reopens: 10`,
			},
		},
		{
			name: "queue_size without queue",
			yaml: `name: w
script: {command: [a]}
queue_size: 3
`,
			want: []string{
				`/w/murmur.yaml:3: queue_size applies only with task_acceptance: queue; add task_acceptance: queue, or remove queue_size`,
			},
		},
		{
			name: "duplicate key",
			yaml: `name: w
script: {command: [a]}
name: v
`,
			want: []string{
				`/w/murmur.yaml:3: key "name" appears twice at the top level (first at line 1); keep one of them`,
			},
		},
		{
			name: "not a bool",
			yaml: `name: w
script: {command: [a]}
capabilities: {peer_fetch: yes}
`,
			want: []string{
				`/w/murmur.yaml:3: capabilities.peer_fetch must be true or false, not "yes"; write peer_fetch: true or peer_fetch: false`,
			},
		},
		{
			name: "quoted number",
			yaml: `name: w
inference:
  driver: x
  choices: {x: {driver: script}}
  max_turns: "50"
`,
			want: []string{
				`/w/murmur.yaml:5: inference.max_turns must be a whole number, not the quoted text "50"; remove the quotes: max_turns: 50`,
			},
		},
		{
			name: "list and mapping where text and list belong",
			yaml: `name: [w]
script: {command: ./a.sh}
`,
			want: []string{
				`/w/murmur.yaml:1: name must be a single value, not a list; write the value on the same line, such as name: value (quote text that holds ": ")`,
				`/w/murmur.yaml:2: script.command must be a list, not "./a.sh"; write command: [a, b], or one "- item" line per entry`,
			},
		},
		{
			name: "tab indentation",
			yaml: `name: w
	script: x
`,
			want: []string{
				`/w/murmur.yaml:2: not valid YAML: found a tab character that violates indentation; fix the syntax there: indent with spaces only, and quote text that holds ": " or starts with one of {[*&!|>%@'"`,
			},
		},
		{
			name: "empty file",
			yaml: `
`,
			want: []string{
				`/w/murmur.yaml:1: the file is empty; write name: worker, then inference: or script:`,
			},
		},
		{
			name: "not a mapping",
			yaml: `- a
- b
`,
			want: []string{
				`/w/murmur.yaml:1: the file must be a mapping of keys, not a list; write name: worker, then inference: or script:`,
			},
		},
		{
			name: "lifecycle blocks incomplete",
			yaml: `name: w
script: {command: [a]}
lifecycle:
  keep_working: {}
  done_check: {limit: 2}
`,
			want: []string{
				`/w/murmur.yaml:4: lifecycle.keep_working has no limit; write keep_working: {limit: 20}`,
				`/w/murmur.yaml:5: lifecycle.done_check.command is missing; name the program and its arguments, such as command: [make, check]`,
			},
		},
		{
			name: "exports and control",
			yaml: `name: w
script: {command: [a]}
exports: {peer_files: ../up}
control: {agent_settings: [inference.drivr]}
`,
			want: []string{
				`/w/murmur.yaml:3: exports.peer_files "../up" leaves the workdir; write a directory inside the workdir, such as peer_files: out`,
				`/w/murmur.yaml:4: control.agent_settings entry "inference.drivr" is not a setting the agent may change; the settings are: inference.driver; did you mean "inference.driver"?`,
			},
		},
		{
			name: "peer_files mapping",
			yaml: `name: w
script: {command: [a]}
exports:
  peer_files: {root: /abs, ttl: soon, tll: 1h}
`,
			want: []string{
				`/w/murmur.yaml:4: exports.peer_files.root "/abs" is an absolute path, but the export root is relative to the workdir; write a directory inside the workdir, such as root: out`,
				`/w/murmur.yaml:4: exports.peer_files.ttl "soon" is not a duration; write a number with a unit, such as ttl: 1h, ttl: 30m or ttl: 90s`,
				`/w/murmur.yaml:4: unknown key "tll" in exports.peer_files; known keys: root, ttl; did you mean "ttl"?`,
			},
		},
		{
			name: "peer_files without a root, ttl too short",
			yaml: `name: w
script: {command: [a]}
exports:
  peer_files:
    ttl: 500ms
`,
			want: []string{
				`/w/murmur.yaml:5: exports.peer_files.ttl "500ms" is shorter than a second; write at least 1s, such as ttl: 1h, or remove the key for the default of 1h`,
				`/w/murmur.yaml:5: exports.peer_files has no root; add the export root, such as peer_files: {root: out, ttl: 1h}`,
			},
		},
		{
			name: "peer_files root empty or leaving",
			yaml: `name: w
script: {command: [a]}
exports: {peer_files: {root: "a/../../b"}}
`,
			want: []string{
				`/w/murmur.yaml:3: exports.peer_files.root "a/../../b" leaves the workdir; write a directory inside the workdir, such as root: out`,
			},
		},
		{
			name: "peer_fetch mapping",
			yaml: `name: w
script: {command: [a]}
capabilities:
  peer_fetch: {max_mb: 0, maxmb: 5}
`,
			want: []string{
				`/w/murmur.yaml:4: capabilities.peer_fetch.max_mb is 0, so no file could be fetched; write at least 1, such as max_mb: 64, or remove the key for the default of 64`,
				`/w/murmur.yaml:4: unknown key "maxmb" in capabilities.peer_fetch; known keys: max_mb; did you mean "max_mb"?`,
			},
		},
		{
			name: "peer_fetch max_mb not a number",
			yaml: `name: w
script: {command: [a]}
capabilities: {peer_fetch: {max_mb: lots}}
`,
			want: []string{
				`/w/murmur.yaml:3: capabilities.peer_fetch.max_mb must be a whole number, not "lots"; write a whole number of 0 or more, such as max_mb: 10`,
			},
		},
		{
			name: "anthropic with base_url and script",
			yaml: `name: w
inference:
  driver: x
  choices: {x: {driver: anthropic, model: m, base_url: "localhost:1234", script: s.yaml}}
`,
			want: []string{
				`/w/murmur.yaml:4: inference.choices.x.base_url "localhost:1234" is not an http or https URL; write the API's base URL, such as base_url: http://127.0.0.1:11434/v1`,
				`/w/murmur.yaml:4: inference.choices.x.script applies only to driver: script, not anthropic; remove script:, or set driver: script`,
			},
		},
		{
			name: "driver missing",
			yaml: `name: w
inference:
  choices: {x: {driver: script}}
`,
			want: []string{
				`/w/murmur.yaml:2: inference.driver is missing; name the choice the session starts on, such as driver: x`,
			},
		},
		{
			name: "inference empty",
			yaml: `name: w
inference:
`,
			want: []string{
				`/w/murmur.yaml:2: inference has no value; give it a value, or remove the key`,
			},
		},
		{
			name: "unknown nested key with suggestion",
			yaml: `name: w
script: {command: [a]}
capabilities:
  shel: {allow: [ls]}
  network: {allow: [localhost], deny: [x]}
`,
			want: []string{
				`/w/murmur.yaml:4: unknown key "shel" in capabilities; known keys: shell, spawn, plan, peer_fetch, network, install, hooks; did you mean "shell"?`,
				`/w/murmur.yaml:5: unknown key "deny" in capabilities.network; known keys: allow`,
			},
		},
		{
			name: "agent_settings on a script capsule",
			yaml: `name: w
script: {command: [a]}
control: {agent_settings: [inference.driver]}
`,
			want: []string{
				`/w/murmur.yaml:3: control.agent_settings lists inference.driver, but a script capsule has no inference: block; remove inference.driver from control.agent_settings, or make this an agent capsule`,
			},
		},
		{
			name: "output cap fills the window",
			yaml: `name: w
inference:
  driver: x
  choices: {x: {driver: openai, model: m, context_window: 1000, max_output_tokens: 1000}}
`,
			want: []string{
				`/w/murmur.yaml:4: inference.choices.x.max_output_tokens (1000) leaves no room for input in context_window (1000); make max_output_tokens smaller than context_window`,
			},
		},
		{
			name: "alias bomb",
			yaml: "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
				"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
			want: []string{
				`/w/murmur.yaml:1: the file expands to more than 100000 values through its aliases; write the values out instead of nesting *aliases`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(path, []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want errors", c)
			}
			if c != nil {
				t.Errorf("Parse returned a capsule along with its errors")
			}
			var got []string
			for _, e := range unjoin(err) {
				var ce *Error
				if !errors.As(e, &ce) {
					t.Errorf("error %q is a %T, not a *Error", e, e)
					continue
				}
				if ce.File != path || ce.Line < 1 || ce.Msg == "" || ce.Fix == "" {
					t.Errorf("Error %+v lacks its file, line, message or fix", *ce)
				}
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func ptrTo[T any](v T) *T { return &v }

// TestLoadCapsuleFull loads a murmur.yaml that writes every key of DESIGN §4.2.
func TestLoadCapsuleFull(t *testing.T) {
	dir, err := filepath.Abs("testdata/capsule/full")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load("testdata/capsule/full")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Capsule{
		Dir:          dir,
		Path:         filepath.Join(dir, "murmur.yaml"),
		Name:         "worker",
		Description:  "answers arithmetic questions",
		Instructions: "You are a careful worker.\n",
		Inference: &Inference{
			Driver: "local",
			Choices: map[string]Choice{
				"local": {Driver: "script", Script: "script.yaml"},
				"gpt": {Driver: "openai", Model: "gpt-4.1-mini", BaseURL: "http://127.0.0.1:11434/v1",
					Credential: "env:OPENAI_API_KEY"},
				"claude": {Driver: "anthropic", Model: "claude-sonnet-4-5", Credential: "file:/run/secrets/anthropic",
					ContextWindow: 200000, MaxOutputTokens: 8192, MaxInputTokens: 180000},
			},
			ChoiceOrder:      []string{"local", "gpt", "claude"},
			MaxTurns:         50,
			MaxSessionTokens: 2000000,
			Compaction:       Compaction{Threshold: 0.8},
			ToolRefresh:      "every_turn",
		},
		Transport: "http",
		Capabilities: Capabilities{
			Shell:     ShellGrant{AllowList: AllowList{Allow: []string{"ls", "cat", "expr"}}},
			Spawn:     AllowList{Allow: []string{"local/summarizer"}},
			Plan:      Plan{Submit: true},
			PeerFetch: true,
			Network:   AllowList{Allow: []string{"localhost"}},
			Install:   Install{Tool: []string{"local/*"}, Skill: []string{"local/*"}, From: []string{"stores"}},
		},
		Exports: Exports{PeerFiles: "out"},
		Control: Control{AgentSettings: []string{"inference.driver"}},
		Lifecycle: Lifecycle{
			ShellGraceSecs:         ptrTo(10),
			DeadlineNoticeSecs:     ptrTo(300),
			DelegationDeadlineSecs: ptrTo(600),
			MaxTaskReopens:         ptrTo(2),
			KeepWorking:            &KeepWorking{Limit: 20},
			DoneCheck:              &DoneCheck{Command: []string{"make", "check"}, Limit: 3},
		},
		Deadline:       2 * time.Hour,
		TaskAcceptance: "queue",
		QueueSize:      4,
		AfterTask:      "sleep",
		Tools:          []string{"local/bash", "local/fmt@1.2.0"},
		Skills:         []string{"local/style"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Capsule{})); diff != "" {
		t.Errorf("capsule (-want +got):\n%s", diff)
	}
	if !got.IsAgent() {
		t.Errorf("IsAgent() = false for a capsule with inference:")
	}
	for key, line := range map[string]int{"name": 2, "inference.driver": 7, "inference.choices.gpt": 10, "tools[1]": 39, "skills": 40, "nope": 0} {
		if got := got.Line(key); got != line {
			t.Errorf("Line(%q) = %d, want %d", key, got, line)
		}
	}

	// The same file, named directly.
	again, err := Load(filepath.Join("testdata/capsule/full", "murmur.yaml"))
	if err != nil {
		t.Fatalf("Load of the file itself: %v", err)
	}
	if diff := cmp.Diff(want, again, cmpopts.IgnoreUnexported(Capsule{})); diff != "" {
		t.Errorf("capsule loaded by file name (-want +got):\n%s", diff)
	}
}

func TestLoadCapsuleMinimal(t *testing.T) {
	for _, tt := range []struct {
		dir   string
		want  func(dir string) *Capsule
		agent bool
	}{
		{
			dir: "testdata/capsule/script",
			want: func(dir string) *Capsule {
				return &Capsule{Dir: dir, Path: filepath.Join(dir, "murmur.yaml"), Name: "adder",
					Script: &ScriptSpec{Command: []string{"./answer.sh"}}, Transport: "http", TaskAcceptance: "reject"}
			},
		},
		{
			dir:   "testdata/capsule/agent",
			agent: true,
			want: func(dir string) *Capsule {
				return &Capsule{Dir: dir, Path: filepath.Join(dir, "murmur.yaml"), Name: "echo",
					Inference: &Inference{Driver: "local", Choices: map[string]Choice{"local": {Driver: "script"}},
						ChoiceOrder: []string{"local"}},
					Transport: "http", TaskAcceptance: "reject"}
			},
		},
	} {
		t.Run(filepath.Base(tt.dir), func(t *testing.T) {
			dir, _ := filepath.Abs(tt.dir)
			got, err := Load(tt.dir)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want(dir), got, cmpopts.IgnoreUnexported(Capsule{})); diff != "" {
				t.Errorf("capsule (-want +got):\n%s", diff)
			}
			if got.IsAgent() != tt.agent {
				t.Errorf("IsAgent() = %v, want %v", got.IsAgent(), tt.agent)
			}
		})
	}
}

func TestCapsuleDefaults(t *testing.T) {
	c, err := Parse("/w/murmur.yaml", []byte("name: w\nscript: {command: [a]}\ntask_acceptance: queue\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.QueueSize != DefaultQueueSize || c.Transport != TransportHTTP || c.Deadline != 0 {
		t.Errorf("queue_size %d, transport %q, deadline %v; want %d, http, 0", c.QueueSize, c.Transport, c.Deadline, DefaultQueueSize)
	}
}

// TestPeerFileForms reads both forms of exports.peer_files and capabilities.peer_fetch.
func TestPeerFileForms(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		exports Exports
		fetch   bool
		maxMB   int
	}{
		{"exports: {peer_files: out}\ncapabilities: {peer_fetch: true}\n", Exports{PeerFiles: "out"}, true, 0},
		{"exports: {peer_files: {root: out/shared, ttl: 2h}}\ncapabilities: {peer_fetch: {max_mb: 8}}\n", Exports{PeerFiles: "out/shared", PeerFilesTTL: 2 * time.Hour}, true, 8},
		{"exports: {peer_files: {root: .}}\ncapabilities: {peer_fetch: {}}\n", Exports{PeerFiles: "."}, true, 0},
		{"capabilities: {peer_fetch: false}\n", Exports{}, false, 0},
	} {
		c, err := Parse("/w/murmur.yaml", []byte("name: w\nscript: {command: [a]}\n"+tc.yaml))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if diff := cmp.Diff(tc.exports, c.Exports); diff != "" {
			t.Errorf("%s: exports (-want +got):\n%s", tc.yaml, diff)
		}
		if c.Capabilities.PeerFetch != tc.fetch || c.Capabilities.PeerFetchMaxMB != tc.maxMB {
			t.Errorf("%s: peer_fetch %v, max_mb %d", tc.yaml, c.Capabilities.PeerFetch, c.Capabilities.PeerFetchMaxMB)
		}
	}
}

func TestLoadCapsuleMissingFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Load of an empty directory: %v, want a *Error", err)
	}
	want := filepath.Join(dir, "murmur.yaml") + ": no murmur.yaml in the capsule directory; create it (with name: and inference: or script:), or point the roster's capsule: at the capsule's directory"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

// TestCapsuleScriptRelative checks that a script driver's script: is found relative to the capsule
// directory, wherever the process runs.
func TestCapsuleScriptRelative(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte("rules: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := "name: w\ninference:\n  driver: l\n  choices: {l: {driver: script, script: s.yaml}}\n"
	if _, err := Parse(filepath.Join(dir, "murmur.yaml"), []byte(data)); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

func TestCapsuleShellReadAndNetwork(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data", "sets"), 0o755)
	data := "name: w\nscript: {command: [a]}\ncapabilities:\n  shell: {read: [data/sets, ./data/../data, /usr/share], network: true}\n"
	c, err := Parse(filepath.Join(dir, "murmur.yaml"), []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "data", "sets"), filepath.Join(dir, "data"), "/usr/share"}
	if diff := cmp.Diff(want, c.Capabilities.Shell.Read); diff != "" || !c.Capabilities.Shell.Network {
		t.Errorf("read (-want +got):\n%s\nnetwork: %v", diff, c.Capabilities.Shell.Network)
	}
}
