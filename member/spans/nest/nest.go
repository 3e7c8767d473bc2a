// Package nest starts the spans of work nested in a member's task that runs in packages no tracer is
// handed to: a hook's run (member/hooks), a WebAssembly module's run (member/artifact/wasm), a plan
// (member/plan), a hook's inference call (member/hostcall). A span starts as the child of the span ctx
// carries, on that span's tracer provider, and carries the member ctx names (WithMember; the task's and
// each tool call's span put it there). With no recording span in ctx nothing is started: tracing off
// costs a context lookup.
//
// Imports: internal/telemetry/conv and the OpenTelemetry API only, so a leaf package may use it.
package nest

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

type memberKey struct{}

// WithMember returns ctx naming member as the one whose work it carries.
func WithMember(ctx context.Context, member string) context.Context {
	return context.WithValue(ctx, memberKey{}, member)
}

// Member is the member ctx names; "" when none.
func Member(ctx context.Context) string {
	m, _ := ctx.Value(memberKey{}).(string)
	return m
}

// Start starts a span named name, of kind, as the child of ctx's span, with attrs and murmur.member.
// Without a recording span in ctx it returns ctx and a span that records nothing.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noop.Span{}
	}
	if m := Member(ctx); m != "" {
		attrs = append(attrs[:len(attrs):len(attrs)], conv.Member.String(m))
	}
	tr := parent.TracerProvider().Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL))
	return tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}
