package postgres

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
)

// A task keeps the traceparent of the request that created it, whether stored (Create) or offered to
// the other replicas (Offer); a request without one leaves it empty.
func TestTaskKeepsItsTraceparent(t *testing.T) {
	s, _ := open(t, Config{Replica: "r1"})
	if _, err := s.Renew(t.Context(), time.Minute, 4); err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := s.Create(ctx, task(1, "ctx_a", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Offer(ctx, task(2, "ctx_a", a2a.TaskStateSubmitted), 4); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := s.Create(t.Context(), task(3, "ctx_a", a2a.TaskStateSubmitted)); err != nil {
		t.Fatal(err)
	}
	for id, w := range map[a2a.TaskID]string{"tsk_0001": want, "tsk_0002": want, "tsk_0003": "", "tsk_none": ""} {
		if got, err := s.Traceparent(t.Context(), id); err != nil || got != w {
			t.Errorf("task %s: traceparent %q, %v; want %q", id, got, err, w)
		}
	}
}
