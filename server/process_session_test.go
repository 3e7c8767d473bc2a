package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
)

// Under transport: process the harness's tools/list is the tool array the http loop offers its model:
// the runtime-provided tools and shell binaries, then the declared tool artifacts, each with its own
// description and input schema (DESIGN §13), so a harness that calls only what it is shown (Claude Code)
// can use them.
func TestProcessListsToolArtifacts(t *testing.T) {
	bin := fakeHarness(t)
	module, _ := probeModule(t)
	probe := ".murmur/store/local/probe/1.0.0/"
	fx := startFormation(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: mirror, capsule: ./mirror, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml": processCapsule(bin, "lead", "murmur-jsonl", "normal", "tools: [local/probe]\n"),
		// mirror is the same capsule on the http loop: its model says the tool array it was sent.
		"mirror/murmur.yaml": "name: mirror\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
			"capabilities: {shell: {allow: [expr]}, network: {allow: [localhost]}}\ntools: [local/probe]\n",
		"mirror/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: '{{join .tools \",\"}}'\n",
		probe + "murmur.yaml": "name: local/probe\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\n" +
			"description: reads files\ninput_schema:\n  type: object\n  properties: {op: {type: string}, path: {type: string}}\n",
		probe + "tool.wasm": string(module),
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})

	task := fx.ask(t, "lead", "say listed")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
	}
	mirror := fx.ask(t, "mirror", "go")
	var names []string
	var probeListed map[string]any
	for _, tool := range ofKind(harnessLog(t, fx, "lead"), "tools")[0]["tools"].([]any) {
		m := tool.(map[string]any)
		names = append(names, m["name"].(string))
		if m["name"] == "probe" {
			probeListed = m
		}
	}
	// The http loop's array, less what the process transport never serves (SPEC: pull-artifact and
	// remove-artifact are refused at load; this capsule declares neither).
	if diff := cmp.Diff(strings.Split(answerOf(mirror), ","), names, cmpSortStrings); diff != "" {
		t.Errorf("tools listed to the harness against the http loop's tool array (-http +process):\n%s", diff)
	}
	want := map[string]any{"name": "probe", "description": "reads files", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{"op": map[string]any{"type": "string"}, "path": map[string]any{"type": "string"}}}}
	if diff := cmp.Diff(want, probeListed); diff != "" {
		t.Errorf("the tool artifact as listed (-want +got):\n%s", diff)
	}
}

// An on-task-end hook under transport: process is asked about the harness's answer, as an http
// member's is, and reopening the task resumes the harness's same session with the hook's message; the
// reopen is counted and recorded as task_reopened, and the second answer is the task's.
func TestProcessTaskEndHookReopens(t *testing.T) {
	bin := fakeHarness(t)
	for _, dialect := range []string{"murmur-jsonl", "claude-stream-json"} {
		t.Run(dialect, func(t *testing.T) {
			hook := ".murmur/store/local/check/1.0.0/"
			fx := startFormation(t, map[string]string{
				"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
				"lead/murmur.yaml":   processCapsule(bin, "lead", dialect, "normal", "hooks: [local/check]\n"),
				hook + "murmur.yaml": "name: local/check\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: [on-task-end]\n",
				hook + "hook.sh":     "#!/bin/sh\nif grep -q '\"reopens\":0'; then echo '{\"reopen\":\"Say checked.\"}'; else echo '{}'; fi\n",
			}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})

			task := fx.ask(t, "lead", "say first")
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
			}
			prompts := ofKind(harnessLog(t, fx, "lead"), "prompt")
			// The prompt of the resume is the message the http loop continues its conversation with.
			if len(prompts) != 2 || prompts[1]["resumed"] != true || prompts[1]["session"] != prompts[0]["session"] ||
				!strings.Contains(prompts[1]["prompt"].(string), "Say checked.") {
				t.Fatalf("prompts: %v", prompts)
			}
			if want := "resumed " + prompts[0]["session"].(string) + ": " + prompts[1]["prompt"].(string); answerOf(task) != want {
				t.Errorf("answer %q, want %q", answerOf(task), want)
			}
			trace := traceOf(t, sessionOf(fx, "lead"))
			re := recordsOf(trace, "task_reopened")
			if len(re) != 1 || re[0]["reason"] != "hook" || re[0]["hook"] != "local/check" || re[0]["used"] != 1.0 || re[0]["task"] != string(task.ID) {
				t.Errorf("task_reopened %v", re)
			}
			if runs := recordsOf(trace, "harness_run"); len(runs) != 2 || runs[1]["resumed"] != true {
				t.Errorf("harness_run %v", runs)
			}
		})
	}
}

// Under transport: process {instructions} is the system prompt the http loop sends its model: the
// capsule's instructions, the plan guidance and the declared skills, byte for byte.
func TestProcessInstructionsAreTheSystemPrompt(t *testing.T) {
	bin := fakeHarness(t)
	style := ".murmur/store/local/style/1.0.0/"
	extra := "instructions: Be brief.\nskills: [local/style]\n"
	caps := "capabilities:\n  shell: {allow: [expr]}\n  network: {allow: [localhost]}\n  plan: {submit: true}\n"
	fx := startFormation(t, map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: mirror, capsule: ./mirror, listen: '127.0.0.1:0'}\n",
		// Claude Code's flag; the fake harness takes what follows -- as arguments, its prompt last.
		"lead/murmur.yaml": "name: lead\ntransport: process\nharness:\n  command: [" + bin + ", -dialect, murmur-jsonl, --, --append-system-prompt, \"{instructions}\"]\n" +
			"  resume: [-resume, \"{session}\"]\n  dialect: murmur-jsonl\n" + caps + extra,
		"mirror/murmur.yaml":  "name: mirror\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" + caps + extra,
		"mirror/script.yaml":  "rules:\n  - match: ''\n    turns:\n      - say: '{{.system}}'\n",
		style + "murmur.yaml": "name: local/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n",
		style + "SKILL.md":    "Write in short sentences.\n",
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})

	task := fx.ask(t, "lead", "args")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
	}
	var args []string
	if err := json.Unmarshal([]byte(answerOf(task)), &args); err != nil {
		t.Fatalf("the harness's arguments %q: %v", answerOf(task), err)
	}
	i := indexOf(args, "--append-system-prompt")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("arguments %q", args)
	}
	system := answerOf(fx.ask(t, "mirror", "go"))
	for _, part := range []string{"Be brief.", "Write in short sentences.", "plan"} {
		if !strings.Contains(system, part) {
			t.Errorf("the http loop's system prompt lacks %q: %q", part, system)
		}
	}
	if diff := cmp.Diff(system, args[i+1]); diff != "" {
		t.Errorf("{instructions} against the http loop's system prompt (-http +process):\n%s", diff)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// session-status under transport: process counts every turn the harness closed before it called the
// tool: the harness writes its events, then calls, and the call waits until what it wrote is read.
// Twelve calls in a row, each the k-th, see exactly k turns (the fake harness reports a turn once its
// call is answered, as Claude Code closes a turn when the tool's result comes back).
func TestProcessTurnsCountedBeforeTheCall(t *testing.T) {
	bin := fakeHarness(t)
	for _, dialect := range []string{"murmur-jsonl", "claude-stream-json"} {
		t.Run(dialect, func(t *testing.T) {
			fx := startFormation(t, map[string]string{
				"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
				"lead/murmur.yaml": processCapsule(bin, "lead", dialect, "normal", ""),
			}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
			const calls = 12
			task := fx.ask(t, "lead", strings.Repeat("call session-status\n", calls)+"say ok")
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("lead's task %s: %s", task.Status.State, task.Status.Message.Text())
			}
			results := ofKind(harnessLog(t, fx, "lead"), "result")
			if len(results) != calls {
				t.Fatalf("%d results", len(results))
			}
			var got, want []string
			for k, r := range results {
				st := statusObject(t, r["text"].(string))
				got = append(got, fmt.Sprint(st["turns"].(map[string]any)["used"]))
				want = append(want, fmt.Sprint(k))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("turns.used at each call (-want +got):\n%s", diff)
			}
		})
	}
}
