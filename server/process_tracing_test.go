package server

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/spantest"
)

// Under transport: process the task's trace reaches the harness and comes back: the harness gets
// TRACEPARENT (its task's invoke_agent span) in its environment, and a tool call whose MCP params carry
// _meta.traceparent (the fake harness sends one of its own span in that trace, as a harness that traces
// would) is traced as the child of that span, and its result's _meta.traceparent names that execute_tool
// span.
func TestProcessTraceContext(t *testing.T) {
	bin := fakeHarness(t)
	tp, rec := spantest.Record(t)
	fx := startFormationWith(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml": processCapsule(bin, "lead", "murmur-jsonl", "normal", ""),
	}, Tokens{Operator: "op", Formation: "fm"}, func(c *FormationConfig) { c.TracerProvider = tp })
	task := fx.ask(t, "lead", "call expr {\"args\":[\"6\",\"*\",\"7\"]}\nenv")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, answerOf(task))
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool {
		return len(ss.Of("lead", "invoke_agent lead", trace.SpanKindInternal)) == 1 && len(ss.Of("lead", "execute_tool expr", trace.SpanKindInternal)) == 1
	})
	agent := ss.OneOf(t, "lead", "invoke_agent lead", trace.SpanKindInternal)
	call := ss.OneOf(t, "lead", "execute_tool expr", trace.SpanKindInternal)
	sc := agent.SpanContext()

	want := "TRACEPARENT=00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if env := answerOf(task); !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
		t.Errorf("the harness's environment lacks %s:\n%s", want, env)
	}
	results := ofKind(harnessLog(t, fx, "lead"), "result")
	if len(results) != 1 {
		t.Fatalf("%d tool results in the harness's log, want 1", len(results))
	}
	sent, _ := results[0]["traceparent"].(string)
	parts := strings.Split(sent, "-")
	if len(parts) != 4 || parts[1] != sc.TraceID().String() || parts[2] == sc.SpanID().String() {
		t.Fatalf("the harness sent _meta.traceparent %q; want one of its own span in trace %s", sent, sc.TraceID())
	}
	if call.SpanContext().TraceID() != sc.TraceID() || call.Parent().SpanID().String() != parts[2] || !call.Parent().IsRemote() {
		t.Errorf("execute_tool expr: trace %s, parent %s (remote %v); want trace %s, parent the harness's span %s",
			call.SpanContext().TraceID(), call.Parent().SpanID(), call.Parent().IsRemote(), sc.TraceID(), parts[2])
	}
	// The result names the span that answered the call, in its _meta.traceparent.
	if want := "00-" + sc.TraceID().String() + "-" + call.SpanContext().SpanID().String() + "-01"; results[0]["answered_in"] != want {
		t.Errorf("the tool's result carried _meta.traceparent %v, want its execute_tool span's %s", results[0]["answered_in"], want)
	}
}
