package harness

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// traceEnv is the trace context of ctx's span (the task's invoke_agent span) as a harness's
// environment: TRACEPARENT, and TRACESTATE when it has one, the names OpenTelemetry's environment
// carriers read (DESIGN §17), so a harness that traces puts its spans in the task's trace. None when
// ctx carries no span context.
func traceEnv(ctx context.Context) []string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	env := []string{conv.EnvTraceparent + "=" + c[conv.KeyTraceparent]}
	if ts := c[conv.KeyTracestate]; ts != "" {
		env = append(env, conv.EnvTracestate+"="+ts)
	}
	return env
}

// withoutTraceEnv is env without TRACEPARENT and TRACESTATE: the runtime sets them from the task, and
// harness.env does not override them.
func withoutTraceEnv(env []string) []string {
	out := env[:0:0]
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if name != conv.EnvTraceparent && name != conv.EnvTracestate {
			out = append(out, e)
		}
	}
	return out
}

// CallContext is ctx, the context of a tool call of the harness, within the trace context the call's
// MCP params carry in _meta (traceparent, tracestate: DESIGN §17), whose span its execute_tool span is
// then the child of; ctx as it is when _meta carries none, or one that is malformed.
func CallContext(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[conv.KeyTraceparent].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{conv.KeyTraceparent: tp}
	if ts, _ := meta[conv.KeyTracestate].(string); ts != "" {
		c[conv.KeyTracestate] = ts
	}
	return propagation.TraceContext{}.Extract(ctx, c)
}
