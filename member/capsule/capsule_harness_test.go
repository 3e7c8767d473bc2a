package capsule

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHarnessCapsule(t *testing.T) {
	c, err := Parse("/w/murmur.yaml", []byte(`name: coder
transport: process
harness:
  command: [claude, -p, --output-format, stream-json, --verbose, --mcp-config, "{mcp_config}"]
  resume: [--resume, "{session}"]
  dialect: claude-stream-json
  env: [ANTHROPIC_API_KEY, MODE=fast]
  read: [/opt/claude, notes]
inference: {max_turns: 40}
capabilities: {shell: {allow: [ls]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Harness{Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--mcp-config", "{mcp_config}"},
		Resume: []string{"--resume", "{session}"}, Dialect: "claude-stream-json", Env: []string{"ANTHROPIC_API_KEY", "MODE=fast"},
		Read: []string{"/opt/claude", "/w/notes"}, Network: true}
	if diff := cmp.Diff(want, c.Harness); diff != "" {
		t.Errorf("harness (-want +got):\n%s", diff)
	}
	if !c.IsAgent() || c.Inference.MaxTurns != 40 || c.Transport != TransportProcess {
		t.Errorf("capsule: %+v", c)
	}
	// Without inference: a process capsule is still an agent capsule; network: false turns it off.
	c, err = Parse("/w/murmur.yaml", []byte("name: w\ntransport: process\nharness: {command: [./h], dialect: murmur-jsonl, network: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsAgent() || c.Harness.Network {
		t.Errorf("capsule: %+v, harness %+v", c, c.Harness)
	}
}

func TestHarnessCapsuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"process without harness", "name: w\ntransport: process\n", []string{
			`/w/murmur.yaml:2: transport: process needs a harness: block; add harness: {command: [...], dialect: claude-stream-json | murmur-jsonl, resume: [--resume, "{session}"]}`}},
		{"harness without process", "name: w\nscript: {command: [a]}\nharness: {command: [h], dialect: murmur-jsonl}\n", []string{
			`/w/murmur.yaml:3: harness: is read only under transport: process; add transport: process to run this harness, or remove harness:`}},
		{"bad harness block", "name: w\ntransport: process\nharness:\n  command: []\n  dialect: claude-json\n  env: [\"1BAD\"]\n  netwrk: false\n", []string{
			`/w/murmur.yaml:4: harness.command is empty; write the harness and its arguments, such as command: [claude, -p, --output-format, stream-json, --verbose, --mcp-config, "{mcp_config}"]`,
			`/w/murmur.yaml:5: harness.dialect "claude-json" is not one of claude-stream-json, murmur-jsonl; write dialect: claude-stream-json or dialect: murmur-jsonl`,
			`/w/murmur.yaml:6: harness.env entry "1BAD" is not NAME or NAME=value; write a variable to pass on from mur's environment, such as ANTHROPIC_API_KEY, or one to set, such as MODE=fast`,
			`/w/murmur.yaml:7: unknown key "netwrk" in harness; known keys: command, resume, dialect, env, read, network; did you mean "network"?`}},
		{"missing command and dialect", "name: w\ntransport: process\nharness: {resume: [x]}\n", []string{
			`/w/murmur.yaml:3: harness.command is missing; write the harness and its arguments, such as command: [claude, -p, --output-format, stream-json, --verbose, --mcp-config, "{mcp_config}"]`,
			`/w/murmur.yaml:3: harness.dialect is missing; write dialect: claude-stream-json for Claude Code, or dialect: murmur-jsonl for a harness that speaks murmur's own`}},
		{"driver choices under process", "name: w\ntransport: process\nharness: {command: [h], dialect: murmur-jsonl}\ninference:\n  driver: local\n  choices: {local: {driver: script}}\n", []string{
			`/w/murmur.yaml:6: inference.choices is for transport: http; under transport: process the harness runs its own model; remove inference.driver and inference.choices, and configure the model in the harness's command`}},
		{"script under process", "name: w\ntransport: process\nharness: {command: [h], dialect: murmur-jsonl}\nscript: {command: [a]}\n", []string{
			`/w/murmur.yaml:4: script: is for script capsules, but transport: process runs a harness per task; remove script:, or remove transport: process and harness:`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("/w/murmur.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			var got []string
			for _, e := range unjoin(err) {
				var ce *Error
				if !errors.As(e, &ce) || ce.Line < 1 {
					t.Errorf("error %q has no line", e)
				}
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
