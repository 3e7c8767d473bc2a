package member

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// The spans of the work inside one member's task (DESIGN §17): delegations, plans, hooks, WebAssembly
// modules, background commands and the questions a task asks its sender, each read from an in-memory
// recorder of the OpenTelemetry SDK.

// startTraced is startSession with the session's spans recorded: the session traces on a provider
// of its own, shut down with the test.
func startTraced(t *testing.T, files map[string]string, o sessionOpts) (*testSession, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) }) // after the session's close
	o.tp = tp
	s, _ := startSession(t, files, o)
	return s, rec
}

// spanList is the spans a test reads, with the lookups it makes.
type spanList []sdktrace.ReadOnlySpan

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spanAttrString(s sdktrace.ReadOnlySpan, key string) string {
	v, _ := spanAttr(s, key)
	return v.Emit()
}

// named returns the spans named name, in the order they ended.
func (ss spanList) named(name string) spanList {
	var out spanList
	for _, s := range ss {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the single span named name of kind; the test fails when there is not one.
func (ss spanList) one(t *testing.T, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	got := ss.named(name)
	if len(got) != 1 || got[0].SpanKind() != kind {
		t.Fatalf("%d spans %q, want one of kind %s; the spans: %s", len(got), name, kind, ss)
	}
	return got[0]
}

func (ss spanList) String() string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "\n  %s %s %q (parent %s)", s.SpanContext().SpanID(), s.SpanKind(), s.Name(), s.Parent().SpanID())
	}
	return b.String()
}

// endedSpans waits until ready holds for the spans ended so far, and returns them.
func endedSpans(t *testing.T, rec *tracetest.SpanRecorder, ready func(spanList) bool) spanList {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ss := spanList(rec.Ended())
		if ready(ss) {
			return ss
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spans never came; those that did: %s", ss)
		}
	}
}

// childOf fails the test unless child is parent's child, in its trace.
func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%q is the child of %s in trace %s, want of %q (%s) in trace %s", child.Name(), child.Parent().SpanID(),
			child.SpanContext().TraceID(), parent.Name(), parent.SpanContext().SpanID(), parent.SpanContext().TraceID())
	}
}

// hasAttrs fails the test unless span has each attribute; a value of "" asks only that it be there.
func hasAttrs(t *testing.T, span sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := spanAttr(span, k)
		if !ok {
			t.Errorf("%q has no attribute %s", span.Name(), k)
		} else if v != "" && got.Emit() != v {
			t.Errorf("%q: %s = %q, want %q", span.Name(), k, got.Emit(), v)
		}
	}
}

// eventsOf returns span's events named name, each as its attributes.
func eventsOf(span sdktrace.ReadOnlySpan, name string) []map[string]string {
	var out []map[string]string
	for _, e := range span.Events() {
		if e.Name != name {
			continue
		}
		m := map[string]string{}
		for _, kv := range e.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		out = append(out, m)
	}
	return out
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
	ss := endedSpans(t, rec, func(ss spanList) bool { // lead's task span, the trace's root, ends last
		for _, s := range ss.named("invoke_agent m") {
			if !s.Parent().IsValid() {
				return true
			}
		}
		return false
	})
	lead := ss.one(t, "invoke_agent m", trace.SpanKindInternal)
	call := ss.one(t, "execute_tool delegate-task", trace.SpanKindInternal)
	sub := ss.one(t, "invoke_agent m/helper", trace.SpanKindInternal)
	childOf(t, call, lead)
	childOf(t, sub, call)
	dlg := spanAttrString(call, "murmur.delegation.id")
	if !strings.HasPrefix(dlg, "dlg_") {
		t.Errorf("the delegate-task call's span names the delegation %q", dlg)
	}
	hasAttrs(t, call, map[string]string{"murmur.delegation.capsule": "helper", "murmur.tool.status": "ok"})
	hasAttrs(t, sub, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "m/helper",
		"murmur.member": "m", "murmur.delegation.id": dlg, "murmur.delegation.capsule": "helper", "murmur.delegation.depth": "1",
		"a2a.task.state": string(a2a.TaskStateCompleted)})
	chats := ss.named("chat local")
	subChats := 0
	for _, c := range chats {
		if c.Parent().SpanID() == sub.SpanContext().SpanID() {
			subChats++
		} else {
			childOf(t, c, lead)
		}
	}
	if subChats != 1 || len(chats) != 4 { // the sub-session's one, lead's three
		t.Errorf("%d chat spans under the sub-session's task, %d in all; want 1 and 4: %s", subChats, len(chats), ss)
	}
	ended := eventsOf(lead, "murmur.delegation.ended")
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
	ss := endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("invoke_agent m")) == 1 })
	agent := ss.one(t, "invoke_agent m", trace.SpanKindInternal)
	call := ss.one(t, "execute_tool submit-plan", trace.SpanKindInternal)
	plan := ss.one(t, "murmur.plan", trace.SpanKindInternal)
	childOf(t, call, agent)
	childOf(t, plan, call)
	hasAttrs(t, plan, map[string]string{"murmur.plan.steps": "2", "murmur.plan.on_error": "stop", "murmur.plan.steps.ok": "2",
		"murmur.plan.steps.error": "0", "murmur.plan.steps.skipped": "0", "murmur.member": "m"})
	steps := ss.named("execute_tool session-status")
	if len(steps) != 2 {
		t.Fatalf("%d step spans, want 2: %s", len(steps), ss)
	}
	for i, st := range steps {
		childOf(t, st, plan)
		hasAttrs(t, st, map[string]string{"gen_ai.tool.call.id": fmt.Sprintf("%s.s%d", spanAttrString(call, "gen_ai.tool.call.id"), i+1)})
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
	ss := endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("invoke_agent m")) == 1 })
	agent := ss.one(t, "invoke_agent m", trace.SpanKindInternal)
	calls := ss.named("execute_tool session-status")
	runs := ss.named("murmur.hook on-tool-call")
	if len(calls) != 2 || len(runs) != 2 {
		t.Fatalf("%d calls and %d on-tool-call runs, want 2 each: %s", len(calls), len(runs), ss)
	}
	for i, want := range []struct{ outcome, denied, status string }{{"deny", "true", "refused"}, {"allow", "false", "ok"}} {
		childOf(t, runs[i], calls[i])
		hasAttrs(t, runs[i], map[string]string{"murmur.hook.name": "local/guard", "murmur.hook.event": "on-tool-call",
			"murmur.hook.outcome": want.outcome, "murmur.hook.denied": want.denied, "gen_ai.tool.name": "session-status", "murmur.member": "m"})
		hasAttrs(t, calls[i], map[string]string{"murmur.tool.status": want.status})
	}
	ends := ss.named("murmur.hook on-task-end")
	if len(ends) != 2 {
		t.Fatalf("%d on-task-end runs, want 2: %s", len(ends), ss)
	}
	for i, outcome := range []string{"reopen", "none"} {
		childOf(t, ends[i], agent)
		hasAttrs(t, ends[i], map[string]string{"murmur.hook.name": "local/check", "murmur.hook.event": "on-task-end",
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
	ss := endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("invoke_agent m")) == 1 })
	call := ss.one(t, "execute_tool wordcount", trace.SpanKindInternal)
	hook := ss.one(t, "murmur.hook on-tool-call", trace.SpanKindInternal)
	run := ss.one(t, "murmur.wasm counter", trace.SpanKindInternal)
	childOf(t, hook, call)
	childOf(t, run, hook)
	hasAttrs(t, hook, map[string]string{"murmur.hook.name": "local/counter", "murmur.hook.outcome": "failed", "murmur.hook.denied": "true"})
	hasAttrs(t, run, map[string]string{"murmur.wasm.module": "counter", "murmur.wasm.status": "ok", "murmur.wasm.exit_code": "0",
		"murmur.wasm.digest": "", "murmur.wasm.cold": "", "murmur.member": "m"})

	// Without the hook, the tool's own module run is under its call.
	delete(files, ".murmur/store/local/counter/1.0.0/murmur.yaml")
	delete(files, ".murmur/store/local/counter/1.0.0/tool.wasm")
	files["murmur.yaml"] = agentCapsule("tools: [local/wordcount]\n")
	s, rec = startTraced(t, files, artifactOpts(t))
	if got := answer(s.run(t, "count", Origin{})); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	ss = endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("invoke_agent m")) == 1 })
	call = ss.one(t, "execute_tool wordcount", trace.SpanKindInternal)
	run = ss.one(t, "murmur.wasm wordcount", trace.SpanKindInternal)
	childOf(t, run, call)
	hasAttrs(t, run, map[string]string{"murmur.wasm.module": "wordcount", "murmur.wasm.status": "ok", "murmur.wasm.exit_code": "0"})
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
	ss := endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("murmur.background sh")) == 1 })
	call := ss.one(t, "execute_tool sh", trace.SpanKindInternal)
	bg := ss.one(t, "murmur.background sh", trace.SpanKindInternal)
	childOf(t, bg, call)
	hasAttrs(t, bg, map[string]string{"process.command": "sh", "murmur.background.work_id": id, "process.exit.code": "3",
		"murmur.background.state": "exited", "murmur.member": "m"})
	if bg.Status().Code.String() != "Error" || bg.EndTime().Before(call.EndTime()) {
		t.Errorf("the command's span: status %v, ended %v, its call ended %v", bg.Status(), bg.EndTime(), call.EndTime())
	}
	if len(ss.named("murmur.background background-command")) != 0 {
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
			ss := endedSpans(t, rec, func(ss spanList) bool { return len(ss.named("invoke_agent m")) == 1 })
			agent := ss.one(t, "invoke_agent m", trace.SpanKindInternal)
			asked, answered := eventsOf(agent, "murmur.input.asked"), eventsOf(agent, "murmur.input.answered")
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
