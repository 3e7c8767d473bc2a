package member

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/spantest"
)

// The spans of the work inside one member's task (DESIGN §17): delegations, plans, hooks, WebAssembly
// modules, background commands and the questions a task asks its sender, each read from an in-memory
// recorder of the OpenTelemetry SDK.

// startTraced is startSession with the session's spans recorded: the session traces on a provider
// of its own, shut down with the test.
func startTraced(t *testing.T, files map[string]string, o sessionOpts) (*testSession, *tracetest.SpanRecorder) {
	t.Helper()
	tp, rec := spantest.Record(t) // shut down after the session's close
	o.tp = tp
	s, _ := startSession(t, files, o)
	return s, rec
}

// TestDelegationSpansUnderItsToolCall: the sub-session's task span is the child of the delegating
// delegate-task call's span, in the same trace, named for the member and its sub-capsule and carrying
// the delegation; the sub-session's inference call is below it, and the delegating task's span says how
// the delegation ended.
func TestDelegationSpansUnderItsToolCall(t *testing.T) {
	s, rec := startTraced(t, map[string]string{
		"murmur.yaml": agentCapsule("capabilities: {spawn: {allow: [./helper]}}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: delegate-task, input: {capsule: helper, task: 'sub {{.task}}'}}]\n" +
			"      - say: waiting\n      - say: \"{{.message}}\"\n",
		"helper/murmur.yaml": "name: helper\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n",
		"helper/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'helper got: {{.task}}'\n",
	}, sessionOpts{})
	task := s.run(t, "hello", Origin{})
	if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(answer(task), "helper got: sub hello") {
		t.Fatalf("%s: %q", task.Status.State, answer(task))
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { // lead's task span, the trace's root, ends last
		for _, s := range ss.Named("invoke_agent m") {
			if !s.Parent().IsValid() {
				return true
			}
		}
		return false
	})
	lead := ss.One(t, "invoke_agent m", trace.SpanKindInternal)
	call := ss.One(t, "execute_tool delegate-task", trace.SpanKindInternal)
	sub := ss.One(t, "invoke_agent m/helper", trace.SpanKindInternal)
	spantest.WantChild(t, call, lead)
	spantest.WantChild(t, sub, call)
	dlg := spantest.AttrString(call, "murmur.delegation.id")
	if !strings.HasPrefix(dlg, "dlg_") {
		t.Errorf("the delegate-task call's span names the delegation %q", dlg)
	}
	spantest.WantAttrs(t, call, map[string]string{"murmur.delegation.capsule": "helper", "murmur.tool.status": "ok"})
	spantest.WantAttrs(t, sub, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "m/helper",
		"murmur.member": "m", "murmur.delegation.id": dlg, "murmur.delegation.capsule": "helper", "murmur.delegation.depth": "1",
		"a2a.task.state": string(a2a.TaskStateCompleted)})
	chats := ss.Named("chat local")
	subChats := 0
	for _, c := range chats {
		if c.Parent().SpanID() == sub.SpanContext().SpanID() {
			subChats++
		} else {
			spantest.WantChild(t, c, lead)
		}
	}
	if subChats != 1 || len(chats) != 4 { // the sub-session's one, lead's three
		t.Errorf("%d chat spans under the sub-session's task, %d in all; want 1 and 4: %s", subChats, len(chats), ss)
	}
	ended := spantest.Events(lead, "murmur.delegation.ended")
	if len(ended) != 1 || ended[0]["murmur.delegation.id"] != dlg || ended[0]["murmur.delegation.status"] != "completed" ||
		ended[0]["murmur.delegation.capsule"] != "helper" {
		t.Errorf("the delegating task's murmur.delegation.ended events: %v", ended)
	}
}

// TestPlanSpanOverItsSteps: a plan is a murmur.plan span under its submit-plan call, with its step count,
// and each step's execute_tool span is its child.
func TestPlanSpanOverItsSteps(t *testing.T) {
	s, rec := startTraced(t, map[string]string{
		"murmur.yaml": agentCapsule("capabilities: {plan: {submit: true}}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: submit-plan, input: {steps: [{id: s1, tool: session-status}, {id: s2, tool: session-status}]}}]\n" +
			"      - say: '{{(index .results 0).status}}'\n",
	}, sessionOpts{})
	if task := s.run(t, "plan", Origin{}); answer(task) != "ok" {
		t.Fatalf("%s: %q", task.Status.State, answer(task))
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("invoke_agent m")) == 1 })
	agent := ss.One(t, "invoke_agent m", trace.SpanKindInternal)
	call := ss.One(t, "execute_tool submit-plan", trace.SpanKindInternal)
	plan := ss.One(t, "murmur.plan", trace.SpanKindInternal)
	spantest.WantChild(t, call, agent)
	spantest.WantChild(t, plan, call)
	spantest.WantAttrs(t, plan, map[string]string{"murmur.plan.steps": "2", "murmur.plan.on_error": "stop", "murmur.plan.steps.ok": "2",
		"murmur.plan.steps.error": "0", "murmur.plan.steps.skipped": "0", "murmur.member": "m"})
	steps := ss.Named("execute_tool session-status")
	if len(steps) != 2 {
		t.Fatalf("%d step spans, want 2: %s", len(steps), ss)
	}
	for i, st := range steps {
		spantest.WantChild(t, st, plan)
		spantest.WantAttrs(t, st, map[string]string{"gen_ai.tool.call.id": fmt.Sprintf("%s.s%d", spantest.AttrString(call, "gen_ai.tool.call.id"), i+1)})
	}
}

// TestHookRunSpans: each run of a hook is a murmur.hook span with its name, event and outcome: an
// on-tool-call run under the call's span (denied or not), an on-task-end run under the task's.
func TestHookRunSpans(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("hooks: [local/guard, local/check]\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: session-status, input: {note: secret}}, {tool: session-status}]\n" +
			"      - say: first\n      - say: checked\n",
	}
	storeHook(files, "local/guard", "[on-tool-call]",
		`if grep -q secret; then echo '{"decision":"deny","reason":"no secrets"}'; else echo '{"decision":"allow"}'; fi`)
	storeHook(files, "local/check", "[on-task-end]",
		`if grep -q '"reopens":0'; then echo '{"reopen":"Say checked."}'; else echo '{}'; fi`)
	s, rec := startTraced(t, files, artifactOpts(t))
	if got := answer(s.run(t, "go", Origin{})); got != "checked" {
		t.Fatalf("answer %q", got)
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("invoke_agent m")) == 1 })
	agent := ss.One(t, "invoke_agent m", trace.SpanKindInternal)
	calls := ss.Named("execute_tool session-status")
	runs := ss.Named("murmur.hook on-tool-call")
	if len(calls) != 2 || len(runs) != 2 {
		t.Fatalf("%d calls and %d on-tool-call runs, want 2 each: %s", len(calls), len(runs), ss)
	}
	for i, want := range []struct{ outcome, denied, status string }{{"deny", "true", "refused"}, {"allow", "false", "ok"}} {
		spantest.WantChild(t, runs[i], calls[i])
		spantest.WantAttrs(t, runs[i], map[string]string{"murmur.hook.name": "local/guard", "murmur.hook.event": "on-tool-call",
			"murmur.hook.outcome": want.outcome, "murmur.hook.denied": want.denied, "gen_ai.tool.name": "session-status", "murmur.member": "m"})
		spantest.WantAttrs(t, calls[i], map[string]string{"murmur.tool.status": want.status})
	}
	ends := ss.Named("murmur.hook on-task-end")
	if len(ends) != 2 {
		t.Fatalf("%d on-task-end runs, want 2: %s", len(ends), ss)
	}
	for i, outcome := range []string{"reopen", "none"} {
		spantest.WantChild(t, ends[i], agent)
		spantest.WantAttrs(t, ends[i], map[string]string{"murmur.hook.name": "local/check", "murmur.hook.event": "on-task-end",
			"murmur.hook.outcome": outcome, "murmur.hook.denied": "false"})
	}
}

// TestWasmRunSpans: a tool artifact's module run is a murmur.wasm span under its call's span, and a
// WebAssembly hook's run is one under the hook run's span.
func TestWasmRunSpans(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("tools: [local/wordcount]\nhooks: [local/counter]\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: wordcount, input: {text: 'one two'}}]\n" +
			"      - say: '{{(index .results 0).status}}'\n",
	}
	storeTool(t, files, "local/wordcount", "1.0.0")
	// A WebAssembly hook that answers what wordcount answers: data with no decision, so its run fails and
	// denies the call.
	files[".murmur/store/local/counter/1.0.0/murmur.yaml"] = "name: local/counter\nversion: 1.0.0\nruntime: hook\nimplementation: wasm\nmodule: tool.wasm\nevents: [on-tool-call]\n"
	files[".murmur/store/local/counter/1.0.0/tool.wasm"] = wordcountModule(t)
	s, rec := startTraced(t, files, artifactOpts(t))
	if got := answer(s.run(t, "count", Origin{})); got != "refused" {
		t.Fatalf("answer %q", got)
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("invoke_agent m")) == 1 })
	call := ss.One(t, "execute_tool wordcount", trace.SpanKindInternal)
	hook := ss.One(t, "murmur.hook on-tool-call", trace.SpanKindInternal)
	run := ss.One(t, "murmur.wasm counter", trace.SpanKindInternal)
	spantest.WantChild(t, hook, call)
	spantest.WantChild(t, run, hook)
	spantest.WantAttrs(t, hook, map[string]string{"murmur.hook.name": "local/counter", "murmur.hook.outcome": "failed", "murmur.hook.denied": "true"})
	spantest.WantAttrs(t, run, map[string]string{"murmur.wasm.module": "counter", "murmur.wasm.status": "ok", "murmur.wasm.exit_code": "0",
		"murmur.wasm.digest": "", "murmur.wasm.cold": "", "murmur.member": "m"})

	// Without the hook, the tool's own module run is under its call.
	delete(files, ".murmur/store/local/counter/1.0.0/murmur.yaml")
	delete(files, ".murmur/store/local/counter/1.0.0/tool.wasm")
	files["murmur.yaml"] = agentCapsule("tools: [local/wordcount]\n")
	s, rec = startTraced(t, files, artifactOpts(t))
	if got := answer(s.run(t, "count", Origin{})); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	ss = spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("invoke_agent m")) == 1 })
	call = ss.One(t, "execute_tool wordcount", trace.SpanKindInternal)
	run = ss.One(t, "murmur.wasm wordcount", trace.SpanKindInternal)
	spantest.WantChild(t, run, call)
	spantest.WantAttrs(t, run, map[string]string{"murmur.wasm.module": "wordcount", "murmur.wasm.status": "ok", "murmur.wasm.exit_code": "0"})
}

// TestBackgroundCommandSpan: a command that moves to the background has a span of its life there, the
// child of the shell call that started it, ended when it exits, with its name and exit code.
func TestBackgroundCommandSpan(t *testing.T) {
	s, rec := startTraced(t, map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  shell: {allow: [sh]}\nlifecycle: {shell_grace_secs: 1}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: sh, input: {args: ['-c', 'sleep 2; exit 3']}}]\n" +
			"      - call: [{tool: background-command, input: {operation: wait, work_id: '{{(index .results 0).data.work_id}}', wait_secs: 30}}]\n" +
			"      - say: '{{(index .results 0).data.work_id}} {{(index .results 0).data.exit_code}}'\n",
	}, sessionOpts{confine: true})
	got := answer(s.run(t, "x", Origin{}))
	id, code, _ := strings.Cut(got, " ")
	if !strings.HasPrefix(id, "wrk_") || code != "3" {
		t.Fatalf("answer %q", got)
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("murmur.background sh")) == 1 })
	call := ss.One(t, "execute_tool sh", trace.SpanKindInternal)
	bg := ss.One(t, "murmur.background sh", trace.SpanKindInternal)
	spantest.WantChild(t, bg, call)
	spantest.WantAttrs(t, bg, map[string]string{"process.command": "sh", "murmur.background.work_id": id, "process.exit.code": "3",
		"murmur.background.state": "exited", "murmur.member": "m"})
	if bg.Status().Code.String() != "Error" || bg.EndTime().Before(call.EndTime()) {
		t.Errorf("the command's span: status %v, ended %v, its call ended %v", bg.Status(), bg.EndTime(), call.EndTime())
	}
	if len(ss.Named("murmur.background background-command")) != 0 {
		t.Errorf("background-command's own call started a command's span: %s", ss)
	}
}

// TestInputEventsOnTheTaskSpan: a task that waits for its sender has murmur.input.asked on its span when
// it asks and murmur.input.answered when the answer comes: the model's question, and a hook's approval
// (naming the tool and the hook, never the question's text).
func TestInputEventsOnTheTaskSpan(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("hooks: [local/ask-first]\n"),
		"script.yaml": "rules:\n  - match: '^question$'\n    turns:\n      - ask: 'which colour?'\n      - say: done\n" +
			"  - match: '^approval$'\n    turns:\n      - call: [{tool: session-status}]\n      - say: '{{(index .results 0).status}}'\n",
	}
	storeHook(files, "local/ask-first", "[on-tool-call]", `echo '{"decision": "ask", "question": "May it read its secret status?"}'`)
	s, rec := startTraced(t, files, artifactOpts(t))
	for _, tc := range []struct {
		text, reply, answer string
		asked, answered     map[string]string
	}{
		{"question", "blue", "done", map[string]string{"murmur.input.kind": "question"},
			map[string]string{"murmur.input.kind": "question", "murmur.input.outcome": "answered"}},
		{"approval", "approve", "ok", map[string]string{"murmur.input.kind": "approval", "gen_ai.tool.name": "session-status", "murmur.hook.name": "local/ask-first"},
			map[string]string{"murmur.input.kind": "approval", "murmur.input.outcome": "allow"}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			rec.Reset()
			task, err := s.Send(context.Background(), &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser,
				Parts: []a2a.Part{a2a.TextPart(tc.text)}}, Origin{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if task, err = s.Wait(ctx, task.ID); err != nil || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("%v %v", task.Status.State, err)
			}
			if _, err := s.Send(ctx, &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, TaskID: task.ID,
				Parts: []a2a.Part{a2a.TextPart(tc.reply)}}, Origin{}); err != nil {
				t.Fatal(err)
			}
			if task, err = s.Wait(ctx, task.ID); err != nil || answer(task) != tc.answer {
				t.Fatalf("%v %q %v", task.Status.State, answer(task), err)
			}
			ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Named("invoke_agent m")) == 1 })
			agent := ss.One(t, "invoke_agent m", trace.SpanKindInternal)
			asked, answered := spantest.Events(agent, "murmur.input.asked"), spantest.Events(agent, "murmur.input.answered")
			if len(asked) != 1 || len(answered) != 1 {
				t.Fatalf("%d murmur.input.asked and %d murmur.input.answered events on the task's span, want 1 each", len(asked), len(answered))
			}
			for _, c := range []struct{ got, want map[string]string }{{asked[0], tc.asked}, {answered[0], tc.answered}} {
				if len(c.got) != len(c.want) {
					t.Errorf("event attributes %v, want %v", c.got, c.want)
				}
				for k, v := range c.want {
					if c.got[k] != v {
						t.Errorf("event attributes %v, want %v", c.got, c.want)
					}
				}
			}
		})
	}
}
