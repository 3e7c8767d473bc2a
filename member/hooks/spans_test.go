package hooks

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/murmur-run/murmur/member/spans/nest"
)

// answering is a hook named name that answers out (or fails with err) at events.
func answering(name, out string, err error, events ...string) Hook {
	return Hook{Name: name, Events: events, Runner: RunnerFunc(func(ctx context.Context, call Call) ([]byte, error) {
		return []byte(out), err
	})}
}

// Each run of a hook is a span "murmur.hook {event}", the child of the span of what it ran for, with the
// hook, the event and the outcome; a run with no recording span above it records none.
func TestHookRunSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	set, err := New(Config{Hooks: []Hook{
		answering("local/ok", `{"decision": "allow"}`, nil, EventToolCall),
		answering("local/asks", `{"decision": "ask"}`, nil, EventToolCall),
		answering("local/broken", "", errors.New("it crashed"), EventToolCall, EventTaskEnd),
		answering("local/again", `{"reopen": "once more"}`, nil, EventTaskEnd),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(nest.WithMember(context.Background(), "m"), "execute_tool x")
	d := set.CheckToolCall(ctx, ToolCall{Tool: "x", Task: "tsk_1"})
	if d.Allow || !d.Failed || d.Hook != "local/broken" {
		t.Fatalf("decision %+v", d)
	}
	if _, ok := set.CheckTaskEnd(ctx, TaskEnd{Task: "tsk_1", Status: "completed"}); !ok {
		t.Fatal("not reopened")
	}
	parent.End()

	type run struct{ Name, Hook, Event, Outcome, Denied, Tool, Member, Status string }
	var got []run
	for _, s := range rec.Ended() {
		if s.Name() == "execute_tool x" {
			continue
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%q is not the child of the parent span", s.Name())
		}
		a := map[string]string{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		got = append(got, run{s.Name(), a["murmur.hook.name"], a["murmur.hook.event"], a["murmur.hook.outcome"],
			a["murmur.hook.denied"], a["gen_ai.tool.name"], a["murmur.member"], s.Status().Code.String()})
	}
	want := []run{
		{"murmur.hook on-tool-call", "local/ok", "on-tool-call", "allow", "false", "x", "m", "Unset"},
		{"murmur.hook on-tool-call", "local/asks", "on-tool-call", "ask", "false", "x", "m", "Unset"},
		{"murmur.hook on-tool-call", "local/broken", "on-tool-call", "failed", "true", "x", "m", "Error"},
		{"murmur.hook on-task-end", "local/broken", "on-task-end", "failed", "false", "", "m", "Error"},
		{"murmur.hook on-task-end", "local/again", "on-task-end", "reopen", "false", "", "m", "Unset"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the hook runs' spans (-want +got):\n%s", diff)
	}

	rec.Reset()
	set.CheckToolCall(context.Background(), ToolCall{Tool: "x"})
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Errorf("%d spans of runs with no span above them", n)
	}
}
