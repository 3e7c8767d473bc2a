package jaegertest

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The version the tests look for is the one tools/jaeger/build builds.
func TestVersionIsTheToolsModules(t *testing.T) {
	b, err := os.ReadFile("../../tools/jaeger/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*github.com/jaegertracing/jaeger ` + regexp.QuoteMeta(Version) + `( |$)`).Match(b) {
		t.Errorf("tools/jaeger/go.mod does not require github.com/jaegertracing/jaeger %s", Version)
	}
}

// Two spans exported over OTLP/HTTP come back from the query API with their parent, kind, attributes
// and event.
func TestSpansComeBack(t *testing.T) {
	j := Start(t)
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLP+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)
	tr := tp.Tracer("jaegertest")
	ctx, root := tr.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer))
	_, child := tr.Start(ctx, "child", trace.WithAttributes(attribute.String("murmur.member", "lead"), attribute.Int("murmur.turns", 3)))
	child.AddEvent("murmur.input.asked", trace.WithAttributes(attribute.String("murmur.input.kind", "approval")))
	child.End()
	root.End()
	id := root.SpanContext().TraceID().String()

	var spans []Span
	for deadline := time.Now().Add(30 * time.Second); len(spans) < 2; time.Sleep(100 * time.Millisecond) {
		if spans, err = j.Trace(ctx, id); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d spans after 30 s", id, len(spans))
		}
	}
	by := map[string]Span{}
	for _, s := range spans {
		by[s.Name] = s
	}
	r, c := by["root"], by["child"]
	if r.Kind != "server" || r.Parent != "" || c.Kind != "internal" || c.Parent != r.SpanID || c.TraceID != id {
		t.Errorf("root %+v\nchild %+v", r, c)
	}
	if c.Tags["murmur.member"] != "lead" || c.Tags["murmur.turns"] != "3" {
		t.Errorf("child's tags %v", c.Tags)
	}
	if len(c.Events) != 1 || c.Events[0].Name != "murmur.input.asked" || c.Events[0].Tags["murmur.input.kind"] != "approval" {
		t.Errorf("child's events %+v", c.Events)
	}
}
