package nest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A nested span is the child of ctx's span, on its provider, with the member ctx names; with no recording
// span in ctx none is started and ctx is returned as it was.
func TestStart(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(WithMember(context.Background(), "m"), "parent")
	cctx, child := Start(ctx, "child", trace.SpanKindClient)
	if trace.SpanFromContext(cctx) != child {
		t.Error("the child's context does not carry it")
	}
	child.End()
	parent.End()
	got := rec.Ended()[0]
	if got.Name() != "child" || got.SpanKind() != trace.SpanKindClient || got.Parent().SpanID() != parent.SpanContext().SpanID() ||
		got.InstrumentationScope().Name != "github.com/murmur-run/murmur" {
		t.Errorf("%q %s, parent %s, scope %q", got.Name(), got.SpanKind(), got.Parent().SpanID(), got.InstrumentationScope().Name)
	}
	if a := got.Attributes(); len(a) != 1 || a[0].Key != "murmur.member" || a[0].Value.AsString() != "m" {
		t.Errorf("attributes %v", a)
	}

	rec.Reset()
	bare := context.Background()
	if c, s := Start(bare, "orphan", trace.SpanKindInternal); c != bare || s.IsRecording() || s.SpanContext().IsValid() {
		t.Error("a span was started with no span above it")
	}
	if n := len(rec.Started()); n != 0 {
		t.Errorf("%d spans started", n)
	}
}
