package calls

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// tracer is the tracer of the tracker's client spans; a Config without one traces nothing.
func (tc *Tracker) tracer() trace.Tracer {
	if tc.cfg.Tracer == nil {
		return noop.Tracer{}
	}
	return tc.cfg.Tracer
}

// clientSpan starts the CLIENT span of one request call c makes to its member's door (DESIGN §17), a
// child of the call's tool call, whichever goroutine makes it: the first SendMessage, a busy member's
// offers again, the GetTask polls, a cancel. id is the member's task, when the call holds one.
func (tc *Tracker) clientSpan(ctx context.Context, c *memberCall, method a2a.Method, id a2a.TaskID) (context.Context, trace.Span) {
	if c.parent != nil {
		ctx = trace.ContextWithSpan(ctx, c.parent)
	}
	ctx, span := tc.tracer().Start(ctx, string(method), trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(conv.RPCSystemJSONRPC, conv.RPCSystem.String("jsonrpc"), conv.RPCMethod.String(string(method)),
		conv.Member.String(tc.cfg.Member), conv.CalledMember.String(c.member), conv.CallID.String(c.id))
	if peer, ok := tc.cfg.Roster.Member(c.member); ok {
		if u, err := url.Parse(peer.URL); err == nil {
			span.SetAttributes(conv.ServerAddress.String(u.Hostname()))
			if p, err := strconv.Atoi(u.Port()); err == nil {
				span.SetAttributes(conv.ServerPort.Int(p))
			}
		}
	}
	if id != "" {
		span.SetAttributes(conv.A2ATaskID.String(string(id)))
	}
	return ctx, span
}

// endClientSpan ends a client span with the task the door answered with, or its error: a JSON-RPC error
// carries its code, a door that could not be reached says so.
func endClientSpan(span trace.Span, t *a2a.Task, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		var ae *a2a.Error
		if errors.As(err, &ae) {
			code := strconv.FormatInt(ae.Code, 10)
			span.SetAttributes(conv.RPCResponseStatus.String(code), conv.ErrorType.String(code))
		} else {
			span.SetAttributes(conv.ErrorType.String("unreachable"))
		}
		span.SetStatus(codes.Error, err.Error())
		return
	}
	if t != nil {
		span.SetAttributes(conv.A2ATaskID.String(string(t.ID)), conv.A2ATaskState.String(string(t.Status.State)),
			conv.A2AContextID.String(t.ContextID))
	}
}

// tracedClient is hc (nil: http.DefaultClient) with the trace context of each request's context put in
// its headers: traceparent (W3C Trace Context) and baggage, so the door called continues the caller's
// trace.
func tracedClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = traceTransport{base: base, propagator: conv.Propagator()}
	return &c
}

// traceTransport injects the trace context of a request's context into its headers.
type traceTransport struct {
	base       http.RoundTripper
	propagator propagation.TextMapPropagator
}

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		r = r.Clone(ctx) // a RoundTripper must not change the request it is given
		t.propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport below, as http.Client's asks.
func (t traceTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
