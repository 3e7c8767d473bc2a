package spans

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/spans/nest"
	"github.com/murmur-run/murmur/runtimetools"
)

func recording(t *testing.T) (*Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return New(tp), rec
}

func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func named(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// A sub-session's task span is named for the member and its sub-capsule and carries its delegation; a
// member's own names the member alone. Both name the member for the spans nested below.
func TestStartAgentOfASubSession(t *testing.T) {
	st, rec := recording(t)
	ctx, span := st.StartAgent(context.Background(), "lead", "tsk_1")
	if nest.Member(ctx) != "lead" {
		t.Errorf("the task's context names the member %q", nest.Member(ctx))
	}
	span.End()
	st.Delegated(Delegation{ID: "dlg_1", Capsule: "helper", Depth: 2})
	_, span = st.StartAgent(context.Background(), "lead", "tsk_2")
	span.End()
	got := rec.Ended()
	if len(got) != 2 || got[0].Name() != "invoke_agent lead" || got[1].Name() != "invoke_agent lead/helper" {
		t.Fatalf("spans %v", got)
	}
	if a := attrsOf(got[0]); a["gen_ai.agent.name"] != "lead" || a["murmur.delegation.id"] != "" {
		t.Errorf("a member's task span: %v", a)
	}
	want := map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead/helper", "murmur.member": "lead",
		"a2a.task.id": "tsk_2", "murmur.delegation.id": "dlg_1", "murmur.delegation.capsule": "helper", "murmur.delegation.depth": "2"}
	if diff := cmp.Diff(want, attrsOf(got[1])); diff != "" {
		t.Errorf("a sub-session's task span (-want +got):\n%s", diff)
	}
}

// The span of a command's life in the background is the child of the shell call it moved from and ends
// when the command does, whichever of the two calls comes first; a call whose result is not a move (a
// background-command report among them) starts none.
func TestBackgroundSpan(t *testing.T) {
	moved := func(id string) runtimetools.Result {
		return runtimetools.Result{Status: runtimetools.StatusOK, Data: map[string]any{"work_id": id, "state": "running"}}
	}
	for _, endedFirst := range []bool{false, true} {
		st, rec := recording(t)
		ctx, call := st.StartTool(context.Background(), "m", driver.ToolCall{ID: "c1", Name: "sh"})
		if endedFirst {
			st.BackgroundEnded("wrk_1", "exited", 3)
		}
		st.EndCall(ctx, call, "sh", moved("wrk_1"), "")
		if !endedFirst {
			if n := len(named(rec, "murmur.background sh")); n != 0 {
				t.Fatalf("the command's span ended before the command")
			}
			st.BackgroundEnded("wrk_1", "exited", 3)
		}
		bg := named(rec, "murmur.background sh")
		if len(bg) != 1 {
			t.Fatalf("ended first %v: %d spans of the command", endedFirst, len(bg))
		}
		if bg[0].Parent().SpanID() != call.SpanContext().SpanID() || bg[0].Status().Description != "exit code 3" {
			t.Errorf("ended first %v: parent %s, status %v", endedFirst, bg[0].Parent().SpanID(), bg[0].Status())
		}
		want := map[string]string{"process.command": "sh", "murmur.background.work_id": "wrk_1", "process.exit.code": "3",
			"murmur.background.state": "exited", "murmur.member": "m"}
		if diff := cmp.Diff(want, attrsOf(bg[0])); diff != "" {
			t.Errorf("ended first %v (-want +got):\n%s", endedFirst, diff)
		}
		if len(st.background) != 0 {
			t.Errorf("ended first %v: %d commands kept after both calls", endedFirst, len(st.background))
		}
	}
	st, rec := recording(t)
	ctx, call := st.StartTool(context.Background(), "m", driver.ToolCall{ID: "c2", Name: "background-command"})
	st.EndCall(ctx, call, "background-command", runtimetools.Result{Status: runtimetools.StatusOK,
		Data: map[string]any{"operation": "status", "work_id": "wrk_2", "state": "running", "elapsed_secs": 1, "output_bytes": 0}}, "")
	if n := len(rec.Ended()); n != 1 || len(st.background) != 0 {
		t.Errorf("background-command's report: %d spans, %d commands kept", n, len(st.background))
	}
	// Tracing off: the two calls still pair up, and nothing is kept.
	var off *Tracing
	off.EndCall(ctx, call, "sh", moved("wrk_3"), "")
	off.BackgroundEnded("wrk_3", "exited", 0)
	st = New(nil)
	ctx, call = st.StartTool(context.Background(), "m", driver.ToolCall{ID: "c3", Name: "sh"})
	st.EndCall(ctx, call, "sh", moved("wrk_4"), "")
	st.BackgroundEnded("wrk_4", "exited", 0)
	if len(st.background) != 0 {
		t.Errorf("tracing off: %d commands kept", len(st.background))
	}
}

// A question to the task's sender and its answer are events on the running task's span, with the kind of
// question and the outcome, never the question's text; an answer with no question before it is none.
func TestInputEvents(t *testing.T) {
	st, rec := recording(t)
	_, span := st.StartAgent(context.Background(), "m", "tsk_1")
	st.SetRunning("tsk_1", span)
	st.InputAnswered("tsk_1", "", nil) // nothing asked
	st.InputAsked("tsk_1", true, "sh", "local/ask")
	st.InputAnswered("tsk_1", "deny", nil)
	st.InputAsked("tsk_1", false, "", "")
	st.InputAnswered("tsk_1", "", context.Canceled)
	st.InputAsked("tsk_1", false, "", "")
	st.InputAnswered("tsk_1", "", errors.New("no answer"))
	st.InputAsked("tsk_2", false, "", "") // not the running task
	st.SetRunning("", nil)
	span.End()
	var got []map[string]string
	for _, e := range rec.Ended()[0].Events() {
		m := map[string]string{"name": e.Name}
		for _, kv := range e.Attributes {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		got = append(got, m)
	}
	want := []map[string]string{
		{"name": "murmur.input.asked", "murmur.input.kind": "approval", "gen_ai.tool.name": "sh", "murmur.hook.name": "local/ask"},
		{"name": "murmur.input.answered", "murmur.input.kind": "approval", "murmur.input.outcome": "deny"},
		{"name": "murmur.input.asked", "murmur.input.kind": "question"},
		{"name": "murmur.input.answered", "murmur.input.kind": "question", "murmur.input.outcome": "canceled"},
		{"name": "murmur.input.asked", "murmur.input.kind": "question"},
		{"name": "murmur.input.answered", "murmur.input.kind": "question", "murmur.input.outcome": "not_answered", "error.type": "*errors.errorString"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the task span's events (-want +got):\n%s", diff)
	}
}

// A hook's inference call is a chat span below the module's run, named as the agent loop's are, with the
// hook; none without a recording span above it.
func TestStartHookChat(t *testing.T) {
	st, rec := recording(t)
	ctx, run := st.Start(nest.WithMember(context.Background(), "m"), "murmur.wasm judge")
	_, chat := StartHookChat(ctx, "local/judge", "local", capsule.Choice{Driver: capsule.DriverScript})
	EndChat(chat, driver.Usage{Reported: true, Input: 3, Output: 1}, nil)
	run.End()
	c := rec.Ended()[0]
	if c.Name() != "chat local" || c.SpanKind() != trace.SpanKindClient || c.Parent().SpanID() != run.SpanContext().SpanID() {
		t.Fatalf("%q %s, parent %s", c.Name(), c.SpanKind(), c.Parent().SpanID())
	}
	want := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "murmur.script", "gen_ai.request.model": "local",
		"murmur.driver.choice": "local", "murmur.hook.name": "local/judge", "murmur.member": "m",
		"gen_ai.usage.input_tokens": "3", "gen_ai.usage.output_tokens": "1"}
	if diff := cmp.Diff(want, attrsOf(c)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, span := StartHookChat(context.Background(), "local/judge", "local", capsule.Choice{}); span.IsRecording() {
		t.Error("a hook's inference call with no span above it records one")
	}
}
