// Package spantest reads the spans a test recorded with the OpenTelemetry SDK's in-memory recorder: the
// lookups and checks the tracing tests of server/ and member/ share (DESIGN §17).
package spantest

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
)

// MemberKey is the attribute that names the member a span belongs to.
const MemberKey = "murmur.member"

// Record returns a tracer provider that keeps every span in memory and its recorder; the provider is
// shut down when the test and its cleanups registered before this one are done.
func Record(t testing.TB) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) }) // an in-memory recorder has nothing to flush
	return tp, rec
}

// Spans is the spans a test reads, with the lookups it makes.
type Spans []sdktrace.ReadOnlySpan

// Attr returns span s's attribute key and whether it has it.
func Attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// AttrString returns span s's attribute key as text; "" when it has none.
func AttrString(s sdktrace.ReadOnlySpan, key string) string {
	v, _ := Attr(s, key)
	return v.Emit()
}

// Named returns the spans named name, in the order they ended.
func (ss Spans) Named(name string) Spans {
	var out Spans
	for _, s := range ss {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Of returns the spans of member named name, of kind.
func (ss Spans) Of(member, name string, kind trace.SpanKind) Spans {
	var out Spans
	for _, s := range ss.Named(name) {
		if s.SpanKind() == kind && AttrString(s, MemberKey) == member {
			out = append(out, s)
		}
	}
	return out
}

// One returns the single span named name, which must be of kind; the test fails when there is not one.
func (ss Spans) One(t testing.TB, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	got := ss.Named(name)
	if len(got) != 1 || got[0].SpanKind() != kind {
		t.Fatalf("%d spans %q, want one of kind %s; the spans: %s", len(got), name, kind, ss)
	}
	return got[0]
}

// OneOf returns the single span of member named name, of kind; the test fails when there is not one.
func (ss Spans) OneOf(t testing.TB, member, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	got := ss.Of(member, name, kind)
	if len(got) != 1 {
		t.Fatalf("%d %s spans %q of %s, want 1; the spans: %s", len(got), kind, name, member, ss)
	}
	return got[0]
}

// String lists the spans one a line, for a failing test's message.
func (ss Spans) String() string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "\n  %s %s %q", s.SpanContext().SpanID(), s.SpanKind(), s.Name())
		if m := AttrString(s, MemberKey); m != "" {
			fmt.Fprintf(&b, " of %s", m)
		}
		fmt.Fprintf(&b, " (parent %s)", s.Parent().SpanID())
	}
	return b.String()
}

// Wait waits until ready holds for the spans ended so far, and returns them; the test fails after 30 s.
func Wait(t testing.TB, rec *tracetest.SpanRecorder, ready func(Spans) bool) Spans {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ss := Spans(rec.Ended())
		if ready(ss) {
			return ss
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spans never came; those that did: %s", ss)
		}
	}
}

// WantChild fails the test unless child is parent's child, in parent's trace.
func WantChild(t testing.TB, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%s %q is the child of %s in trace %s, want of %q (%s) in trace %s", child.SpanKind(), child.Name(),
			child.Parent().SpanID(), child.SpanContext().TraceID(), parent.Name(), parent.SpanContext().SpanID(),
			parent.SpanContext().TraceID())
	}
}

// WantAttrs fails the test unless span has each attribute; a value of "" asks only that it be there.
func WantAttrs(t testing.TB, span sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := Attr(span, k)
		if !ok {
			t.Errorf("%q has no attribute %s", span.Name(), k)
		} else if v != "" && got.Emit() != v {
			t.Errorf("%q: %s = %q, want %q", span.Name(), k, got.Emit(), v)
		}
	}
}

// Events returns span's events named name, each as its attributes.
func Events(span sdktrace.ReadOnlySpan, name string) []map[string]string {
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
