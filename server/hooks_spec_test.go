package server

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
)

// hookFiles are the files of a command hook in the formation's project store, beside roster.yaml.
func hookFiles(files map[string]string, name, events, script string) {
	d := ".murmur/store/local/" + name + "/1.0.0/"
	files[d+"murmur.yaml"] = "name: local/" + name + "\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: " + events + "\n"
	files[d+"hook.sh"] = "#!/bin/sh\n" + script + "\n"
}

// oneMemberRoster is a formation of one member, solo, whose capsule is ./solo.
const oneMemberRoster = "formation: f\nmembers:\n  - {name: solo, capsule: ./solo, listen: '127.0.0.1:0'}\n"

// onlyTask returns member's one task, as GetTask shows it (ListTasks leaves out its artifacts).
func (fx *formationFixture) onlyTask(t *testing.T, member string) *a2a.Task {
	t.Helper()
	page, err := fx.c[member].ListTasks(context.Background(), &a2a.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 1 {
		t.Fatalf("%s's tasks: %v %v", member, page, err)
	}
	got, err := fx.c[member].GetTask(context.Background(), &a2a.GetTaskRequest{ID: page.Tasks[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// SPEC end-without-answer: "task_end.exit_status and the on-task-end exit status: no_answer"; "An
// on-task-end hook may reopen the task; the reopened attempt may answer, or end without an answer
// again". The hook reopens, once, only an ending told status no_answer and the reason given.
func TestOnTaskEndHookReopensANoAnswerEnding(t *testing.T) {
	const lead = "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n"
	for _, tc := range []struct {
		name, second string
		// the worker's task as it ends
		state       a2a.TaskState
		status      string
		noAnswer    any
		answer      string
		exitStatus  string
		resultLines string
	}{
		{name: "answers", second: "      - say: found it after all\n",
			state: a2a.TaskStateCompleted, status: "found it after all", noAnswer: nil, answer: "found it after all", exitStatus: "completed"},
		{name: "ends without an answer again", second: "      - call: [{tool: end-without-answer, input: {reason: 'still nothing'}}]\n      - say: should not run\n",
			state: a2a.TaskStateFailed, status: "still nothing", noAnswer: true, exitStatus: "no_answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{
				"roster.yaml": "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
					"reach:\n  - {from: lead, to: [worker]}\n  - {from: worker, to: [lead]}\n",
				"lead/murmur.yaml":   agentOf("lead"),
				"lead/script.yaml":   lead,
				"worker/murmur.yaml": agentOf("worker") + "hooks: [local/retry]\n",
				"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: end-without-answer, input: {reason: 'no idea'}}]\n" + tc.second,
			}
			hookFiles(files, "retry", "[on-task-end]",
				`in=$(cat); case "$in" in *'"status":"no_answer"'*'"reason":"no idea"'*'"reopens":0'*) echo '{"reopen":"Look again."}';; *) echo '{}';; esac`)
			fx := startFormation(t, files, Tokens{Operator: "op", Formation: "fm"})
			fx.ask(t, "lead", "find it")

			wt := fx.onlyTask(t, "worker")
			m, _ := wt.Metadata["murmur"].(map[string]any)
			if wt.Status.State != tc.state || m["noAnswer"] != tc.noAnswer {
				t.Errorf("worker's task %s %v, want %s noAnswer %v", wt.Status.State, m, tc.state, tc.noAnswer)
			}
			if wt.Status.Message == nil || wt.Status.Message.Text() != tc.status {
				t.Errorf("worker's status message %+v, want %q", wt.Status.Message, tc.status)
			}
			if got := answerOf(wt); got != tc.answer {
				t.Errorf("worker's answer %q, want %q", got, tc.answer)
			}
			recs := fx.records(t, "worker")
			var reopened []map[string]any
			for _, r := range recs {
				switch r["type"] {
				case "task_reopened":
					reopened = append(reopened, r)
				case "task_end":
					if r["exit_status"] != tc.exitStatus {
						t.Errorf("task_end %v, want exit_status %s", r, tc.exitStatus)
					}
				}
			}
			if len(reopened) != 1 || reopened[0]["reason"] != "hook" || reopened[0]["hook"] != "local/retry" || reopened[0]["message"] != "Look again." {
				t.Errorf("task_reopened %v, want one by local/retry", reopened)
			}
			if n := count(recs, "task_failed"); n != 0 {
				t.Errorf("%d task_failed records; a task ending without an answer writes none", n)
			}
			if n := count(recs, "task_end"); n != 1 {
				t.Errorf("%d task_end records, want 1", n)
			}
		})
	}
}

// SPEC remove-artifact: the input is "the full name or the tool name", and a removal is refused as "A
// tool error opening not-removable: for a hook, a driver, an artifact murmur.yaml declares, or a pin with
// origin: operator". By tool name the refusal is the one the full name gets.
func TestRemoveArtifactByToolNameRefusesNotRemovable(t *testing.T) {
	files := map[string]string{
		"roster.yaml": oneMemberRoster,
		"solo/murmur.yaml": "name: solo\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
			"skills: [local/style]\nhooks: [local/guard]\ncapabilities:\n  install: {tool: ['local/*'], skill: ['local/*']}\n",
		"solo/script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: remove-artifact, input: {artifact: style}}, {tool: remove-artifact, input: {artifact: local/style}}," +
			" {tool: remove-artifact, input: {artifact: guard}}, {tool: remove-artifact, input: {artifact: local/guard}}," +
			" {tool: remove-artifact, input: {artifact: ops}}, {tool: remove-artifact, input: {artifact: local/ops}}]\n" +
			"      - say: \"{{range .results}}{{.status}}: {{.output}}\\n{{end}}\"\n",
		"solo/murmur.lock": "pins:\n  - name: local/ops\n    version: 1.0.0\n    digest: sha256:" + strings.Repeat("0", 64) + "\n    origin: operator\n    source: project store\n",
		".murmur/store/local/style/1.0.0/murmur.yaml": "name: local/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n",
		".murmur/store/local/style/1.0.0/SKILL.md":    "Answer in haiku.\n",
	}
	hookFiles(files, "guard", "[on-tool-call]", `echo '{"decision":"allow"}'`)
	fx := startFormation(t, files, Tokens{Operator: "op", Formation: "fm"})
	got := answerOf(fx.ask(t, "solo", "remove them"))
	declared := "refused: not-removable: local/style is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml\n"
	hook := "refused: not-removable: local/guard is declared in murmur.yaml; only the operator takes it out, by editing murmur.yaml\n"
	pin := "refused: not-removable: local/ops is pinned by the operator (origin: operator in murmur.lock); only the operator takes it out\n"
	want := declared + declared + hook + hook + pin + pin
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("remove-artifact's results (-want +got):\n%s", diff)
	}
}

// SPEC "The grant is the tool's existence": "A call naming it anyway is refused with a message naming
// the declaration that is missing", and every other name the session does not have is refused as not
// there; an on-tool-call hook that denies everything is asked only about the tools the session has.
func TestUnstagedCallIsRefusedBeforeTheHooks(t *testing.T) {
	files := map[string]string{
		"roster.yaml":      oneMemberRoster,
		"solo/murmur.yaml": agentOf("solo") + "hooks: [local/deny]\n",
		"solo/script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: delegate-task, input: {capsule: x, task: y}}, {tool: frobnicate}, {tool: session-status}]\n" +
			"      - say: \"{{range .results}}{{.status}}: {{.output}}\\n{{end}}\"\n",
	}
	hookFiles(files, "deny", "[on-tool-call]", `echo '{"decision":"deny","reason":"nothing passes"}'`)
	fx := startFormation(t, files, Tokens{Operator: "op", Formation: "fm"})
	got := answerOf(fx.ask(t, "solo", "try"))
	want := "refused: delegate-task is not available in this session: it exists only when the capsule declares capabilities.spawn.allow, and this capsule does not.\n" +
		"refused: no tool named \"frobnicate\" in this session: a shell binary needs capabilities.shell.allow, an artifact needs tools: in murmur.yaml. Tools you can call: session-status.\n" +
		"refused: denied by policy local/deny: nothing passes\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the turn's results (-want +got):\n%s", diff)
	}
	recs := fx.records(t, "solo")
	var denied []any
	for _, r := range recs {
		if r["type"] == "tool_denied" {
			denied = append(denied, r["tool"])
		}
	}
	if diff := cmp.Diff([]any{"session-status"}, denied); diff != "" {
		t.Errorf("tool_denied records (-want +got):\n%s", diff)
	}
}
