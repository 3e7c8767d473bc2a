package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/member/plan"
)

// planCapsule is an agent capsule on the script driver with expr and echo and submit-plan, plus extra.
func planCapsule(extra string) string {
	return "name: planner\ninstructions: You help.\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
		"capabilities:\n  shell: {allow: [expr, echo]}\n  plan: {submit: true}\n" + extra
}

// fiveSteps is a plan of five shell steps with references; s3 fails (expr exits 2 on a division by
// zero).
const fiveSteps = `[{id: s1, tool: expr, input: {args: ['2', '+', '3']}},
  {id: s2, tool: echo, input: {args: ['got', '${s1.data.exit_code}', '${s1.data.status}']}},
  {id: s3, tool: expr, input: {args: ['1', '/', '0']}},
  {id: s4, tool: echo, input: {args: ['after ${s3.data.exit_code}']}},
  {id: s5, tool: echo, input: {args: ['last ${s2.data.status}']}}]`

// planResult decodes the plan's fenced output.
func planResult(t *testing.T, out string) []map[string]any {
	t.Helper()
	var r struct {
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("plan output %q: %v", out, err)
	}
	return r.Steps
}

// A plan of five shell steps with references, its middle step failing: under stop the rest is skipped,
// under continue it runs with the failed step's results; either way the plan fails, writes one plan
// record, and each step that ran its own tool_call.
func TestPlanOfFiveShellSteps(t *testing.T) {
	script := "rules:\n  - match: '^(?P<mode>stop|continue)$'\n    turns:\n" +
		"      - call: [{tool: submit-plan, input: {on_error: '{{.mode}}', steps: " + strings.ReplaceAll(fiveSteps, "\n", "\n    ") + "}}]\n" +
		"      - say: '{{(index .results 0).status}}|{{(index .results 0).output}}'\n"
	f := startDoor(t, map[string]string{"murmur.yaml": planCapsule(""), "script.yaml": script})
	c := f.client(testOperatorToken)
	for _, tc := range []struct {
		mode     string
		statuses []string
		s4, s5   string
	}{
		{"stop", []string{"ok", "ok", "error", "skipped", "skipped"}, "", ""},
		{"continue", []string{"ok", "ok", "error", "ok", "ok"}, "after 2\n", "last ok\n"},
	} {
		task := sendTask(t, c, tc.mode, false)
		if task.Status.State != a2ago.TaskStateCompleted {
			t.Fatalf("%s: task %s: %s", tc.mode, task.Status.State, statusText(task))
		}
		status, out, _ := strings.Cut(responseText(task), "|")
		if status != "error" {
			t.Errorf("%s: the plan's status is %q, want error (a step failed)", tc.mode, status)
		}
		steps := planResult(t, out)
		if len(steps) != 5 {
			t.Fatalf("%s: %d steps in %s", tc.mode, len(steps), out)
		}
		for i, st := range steps {
			if st["id"] != fmt.Sprintf("s%d", i+1) || st["status"] != tc.statuses[i] {
				t.Errorf("%s: step %d is %v, want status %s", tc.mode, i+1, st, tc.statuses[i])
			}
		}
		if o := steps[1]["output"].(string); !strings.HasSuffix(o, "\n\ngot 0 ok\n") {
			t.Errorf("%s: s2's output %q: its references were not resolved", tc.mode, o)
		}
		if d, _ := steps[2]["data"].(map[string]any); d["exit_code"] != float64(2) {
			t.Errorf("%s: s3's data %v, want exit_code 2", tc.mode, steps[2]["data"])
		}
		for i, want := range map[int]string{3: tc.s4, 4: tc.s5} {
			o, _ := steps[i]["output"].(string)
			if want == "" && o != "" || want != "" && !strings.HasSuffix(o, "\n\n"+want) {
				t.Errorf("%s: s%d's output %q, want it to end %q", tc.mode, i+1, o, want)
			}
		}
	}
	var plans []map[string]any
	stepCalls := 0
	for _, r := range traceAt(t, f.session.RecordsDir()) {
		switch {
		case r["type"] == "plan":
			plans = append(plans, r)
		case r["type"] == "tool_call" && r["tool"] != "submit-plan":
			stepCalls++
		}
	}
	if len(plans) != 2 || plans[0]["on_error"] != "stop" || plans[1]["on_error"] != "continue" || plans[0]["status"] != "error" {
		t.Fatalf("plan records %v", plans)
	}
	if steps := plans[0]["steps"].([]any); len(steps) != 5 || steps[3].(map[string]any)["status"] != "skipped" {
		t.Errorf("the stop plan's record %v", plans[0])
	}
	if stepCalls != 3+5 {
		t.Errorf("%d tool_call records of steps, want 8 (3 under stop, 5 under continue)", stepCalls)
	}
}

// Every refused plan names what is wrong (the step, for a step) and runs nothing.
func TestPlanRefusals(t *testing.T) {
	ok := "{id: s1, tool: expr, input: {args: ['1']}}"
	cases := []struct{ input, want string }{
		{"{steps: [" + ok + ", {id: s2, tool: switch-driver, input: {driver: x}}]}", "step s2: switch-driver is not callable from a plan step; call it on its own, outside a plan."},
		{"{steps: [" + ok + ", {id: s2, tool: pull-artifact}]}", "step s2: pull-artifact is not callable from a plan step"},
		{"{steps: [" + ok + ", {id: s2, tool: remove-artifact}]}", "step s2: remove-artifact is not callable from a plan step"},
		{"{steps: [" + ok + ", {id: s2, tool: end-without-answer}]}", "step s2: end-without-answer is not callable from a plan step"},
		{"{steps: [" + ok + ", {id: s2, tool: submit-plan}]}", "step s2: submit-plan is not callable from a plan step"},
		{"{steps: [" + ok + ", {id: s2, tool: nope}]}", `step s2: no tool named "nope" in this session. Tools you can call: echo, expr, session-status, submit-plan.`},
		{"{steps: [{id: s1, tool: echo, input: {args: ['${s2.output}']}}, {id: s2, tool: expr, input: {args: ['1']}}]}", "step s1: ${s2.output} refers to s2, which is not an earlier step of this plan"},
		{"{steps: [" + ok + ", {id: s2, tool: echo, input: {args: ['${zz.data.x}']}}]}", "step s2: ${zz.data.x} refers to zz, which is not an earlier step of this plan"},
		{"{steps: [" + ok + ", " + ok + "]}", "step s1: an earlier step has the same id; give each step its own."},
		{"{steps: [{id: 'S 1', tool: expr}]}", `step 1: id "S 1" must be lowercase letters, digits, - and _, such as s1.`},
		{"{steps: []}", "a plan has 1 to 32 steps; this one has 0."},
		{"{on_error: retry, steps: [" + ok + "]}", `on_error is "retry"; it takes stop (the default) or continue.`},
		{"{plan: [" + ok + "]}", `it needs {"steps": [{"id": "s1", "tool": "<name>", "input": {…}}, …], with 1 to 32 steps`},
	}
	var b strings.Builder
	b.WriteString("rules:\n")
	for i, tc := range cases {
		fmt.Fprintf(&b, "  - match: '^case%d$'\n    turns:\n      - call: [{tool: submit-plan, input: %s}]\n      - say: '{{(index .results 0).status}}|{{(index .results 0).output}}'\n", i, tc.input)
	}
	f := startDoor(t, map[string]string{"murmur.yaml": planCapsule(""), "script.yaml": b.String()})
	c := f.client(testOperatorToken)
	for i, tc := range cases {
		got := responseText(sendTask(t, c, fmt.Sprintf("case%d", i), false))
		if !strings.HasPrefix(got, "refused|'submit-plan' refused the plan before any step ran: "+tc.want) {
			t.Errorf("case %d: the model saw %q, want the refusal %q", i, got, tc.want)
		}
	}
	for _, r := range traceAt(t, f.session.RecordsDir()) {
		if r["type"] == "plan" || r["type"] == "tool_call" {
			t.Errorf("a refused plan ran or recorded something: %v", r)
		}
	}
}

// The plan guidance is in the system prompt exactly when submit-plan exists, and a step's deadline
// notice rides on the plan's result, not on the step's.
func TestPlanGuidanceAndTheDeadlineNotice(t *testing.T) {
	script := "rules:\n  - match: '^prompt$'\n    turns: [{say: '{{.system}}'}]\n" +
		"  - match: '^notice$'\n    turns:\n      - call: [{tool: submit-plan, input: {steps: [{id: a, tool: expr, input: {args: ['1']}}, {id: b, tool: expr, input: {args: ['2']}}]}}]\n      - say: '{{(index .results 0).text}}'\n"
	with := startDoor(t, map[string]string{"murmur.yaml": planCapsule("deadline: 1h\nlifecycle: {deadline_notice_secs: 7200}\n"), "script.yaml": script})
	if got, want := responseText(sendTask(t, with.client(testOperatorToken), "prompt", false)), "You help.\n\n"+plan.Guidance; got != want {
		t.Errorf("system prompt with submit-plan:\n%q\nwant:\n%q", got, want)
	}
	without := startDoor(t, map[string]string{"murmur.yaml": strings.Replace(planCapsule(""), "  plan: {submit: true}\n", "", 1), "script.yaml": script})
	if got := responseText(sendTask(t, without.client(testOperatorToken), "prompt", false)); got != "You help." {
		t.Errorf("system prompt without submit-plan: %q, want the instructions alone", got)
	}
	got := responseText(sendTask(t, with.client(testOperatorToken), "notice", false))
	lines := strings.Split(got, "\n")
	if len(lines) < 3 || lines[len(lines)-2] != "</untrusted-content>" || !strings.HasPrefix(lines[len(lines)-1], "Session deadline: the runtime ends this session at ") {
		t.Errorf("the plan's result does not end with the deadline notice:\n%s", got)
	}
	if strings.Count(got, "Session deadline") != 1 {
		t.Errorf("the notice appears %d times, want once", strings.Count(got, "Session deadline"))
	}
	n := 0
	for _, r := range traceAt(t, with.session.RecordsDir()) {
		if r["type"] == "deadline_notice" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d deadline_notice records, want 1", n)
	}
}
