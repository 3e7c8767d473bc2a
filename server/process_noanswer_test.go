package server

import (
	"strings"
	"testing"

	"github.com/murmur-run/murmur/a2a"
)

// TestProcessNoAnswerEndingIsAskedAndReopened: under transport: process, a harness that calls
// end-without-answer has its on-task-end hooks asked with exit status no_answer and the reason, as an http
// member's are; a hook that reopens withdraws the ending and resumes the harness's session with its
// message, and the task completes with the resumed run's answer.
func TestProcessNoAnswerEndingIsAskedAndReopened(t *testing.T) {
	bin := fakeHarness(t)
	for _, dialect := range []string{"murmur-jsonl", "claude-stream-json"} {
		t.Run(dialect, func(t *testing.T) {
			files := map[string]string{
				"roster.yaml": "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
					"reach:\n  - {from: lead, to: [worker]}\n  - {from: worker, to: [lead]}\n",
				"lead/murmur.yaml":   agentOf("lead"),
				"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
				"worker/murmur.yaml": processCapsule(bin, "worker", dialect, "normal", "hooks: [local/retry]\n"),
			}
			hookFiles(files, "retry", "[on-task-end]",
				`in=$(cat); case "$in" in *'"status":"no_answer"'*'"reason":"no idea"'*'"reopens":0'*) echo '{"reopen":"Look again."}';; *) echo '{}';; esac`)
			fx := startFormation(t, files, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
			fx.ask(t, "lead", `call end-without-answer {"reason":"no idea"}`)

			wt := fx.onlyTask(t, "worker")
			if wt.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("worker's task %s: %+v", wt.Status.State, wt.Status.Message)
			}
			prompts := ofKind(harnessLog(t, fx, "worker"), "prompt")
			if len(prompts) != 2 || prompts[1]["resumed"] != true || !strings.Contains(prompts[1]["prompt"].(string), "Look again.") {
				t.Fatalf("the harness's prompts %v, want the first and a resume with the hook's message", prompts)
			}
			if got := answerOf(wt); !strings.HasPrefix(got, "resumed ") || !strings.Contains(got, "Look again.") {
				t.Errorf("worker's answer %q, want the resumed run's", got)
			}
			recs := fx.records(t, "worker")
			var reopened []map[string]any
			for _, r := range recs {
				if r["type"] == "task_reopened" {
					reopened = append(reopened, r)
				}
				if r["type"] == "task_end" && r["exit_status"] != "completed" {
					t.Errorf("task_end %v, want completed", r)
				}
			}
			if len(reopened) != 1 || reopened[0]["reason"] != "hook" || reopened[0]["hook"] != "local/retry" {
				t.Errorf("task_reopened %v, want one by local/retry", reopened)
			}
		})
	}
}
