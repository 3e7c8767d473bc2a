package calls

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

// A request to a door carries the trace context of its context (W3C traceparent, and baggage) even when
// no span of this process records, so a member with tracing off passes its caller's trace on; a context
// with none sends no header.
func TestRequestsCarryTheirTraceContext(t *testing.T) {
	got := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	hc := tracedClient(&http.Client{})
	defer hc.CloseIdleConnections()
	get := func(ctx context.Context) http.Header {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.Header) != 0 {
			t.Errorf("the caller's request was changed: %v", req.Header)
		}
		return <-got
	}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	m, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(context.Background(), sc), bag)
	h := get(ctx)
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; h.Get("traceparent") != want || h.Get("baggage") != "tenant=acme" {
		t.Errorf("traceparent %q baggage %q, want %q and tenant=acme", h.Get("traceparent"), h.Get("baggage"), want)
	}
	if h := get(context.Background()); h.Get("traceparent") != "" || h.Get("baggage") != "" {
		t.Errorf("a request of no trace sent traceparent %q baggage %q", h.Get("traceparent"), h.Get("baggage"))
	}
}
