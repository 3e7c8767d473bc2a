package harness

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"
)

// A run's harness gets the trace context of the run's context (the task's invoke_agent span) as
// TRACEPARENT and TRACESTATE, which harness.env does not override; a run outside any trace gets none.
func TestRunTraceEnv(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want []string
	}{
		{"in a trace", trace.ContextWithSpanContext(context.Background(), sc), []string{"MUR_MCP_CONFIG=/run/mcp.json", "A=1",
			"TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "TRACESTATE=vendor=x"}},
		{"in none", context.Background(), []string{"MUR_MCP_CONFIG=/run/mcp.json", "A=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, st := shRunner(MurmurJSONL, `echo '{"type":"answer","text":"ok"}'`)
			r.Env = append(r.Env, "TRACEPARENT=00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01")
			if _, err := r.Run(tc.ctx, "p", "", nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.started[0].Env); diff != "" {
				t.Errorf("the harness's environment (-want +got):\n%s", diff)
			}
		})
	}
}

// A tool call's context continues the trace its _meta names, and is left as it is without one.
func TestCallContext(t *testing.T) {
	ctx := CallContext(context.Background(), map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("with _meta.traceparent: %+v", sc)
	}
	for _, meta := range []map[string]any{nil, {"traceparent": "bogus"}, {"traceparent": 7}} {
		if sc := trace.SpanContextFromContext(CallContext(context.Background(), meta)); sc.IsValid() {
			t.Errorf("_meta %v gave span context %+v", meta, sc)
		}
	}
}
