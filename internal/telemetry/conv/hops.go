package conv

import (
	"context"
	"net/url"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The HTTP attributes of the hops that are plain HTTP rather than JSON-RPC (a push notification's
// webhook POST, a peer file's GET), from semconv v1.41.0: a client span is named by its method (and its
// url.template when it has one), a server span by its method and http.route.
const (
	HTTPRequestMethod  = semconv.HTTPRequestMethodKey
	HTTPResponseStatus = semconv.HTTPResponseStatusCodeKey
	HTTPRoute          = semconv.HTTPRouteKey
	URLFull            = semconv.URLFullKey
	URLTemplate        = semconv.URLTemplateKey
)

// Murmur's attributes of those hops.
const (
	// PushConfigID is the push notification config a webhook POST delivers a change to.
	PushConfigID = attribute.Key("murmur.push.config.id")
	// PeerFileID is a peer-file handle's id (its nonce in hex, the handle_id of the records); never the
	// handle, which is a capability.
	PeerFileID = attribute.Key("murmur.peer_file.id")
	// PeerFileFrom is the member whose door a peer file is fetched from.
	PeerFileFrom = attribute.Key("murmur.peer_file.from")
)

// The W3C Trace Context names a trace context is carried under outside HTTP headers: a harness's
// environment (TRACEPARENT, TRACESTATE, as OpenTelemetry's environment carriers name them) and an MCP
// request's _meta (traceparent, tracestate).
const (
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// Traceparent is the W3C traceparent of ctx's span ("" when ctx carries no valid span context): what a
// hop that is not a request of its own keeps of the trace, such as a queued task's row or a push
// notification waiting in an outbox.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c[KeyTraceparent]
}

// ContextWithTraceparent returns ctx with the remote span context traceparent names as its parent; ctx
// as it is when traceparent is "" or malformed.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{KeyTraceparent: traceparent})
}

// RedactedURL is raw as url.full may show it: without user information, and with every query value
// replaced by REDACTED (a webhook's URL may carry a secret in its query, as the conventions warn).
func RedactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// A SpanSlot receives the trace context of the span a call ran in, for an answer that carries it back
// to the caller: a harness's tool call, whose MCP result says in _meta.traceparent which execute_tool
// span answered it (DESIGN §17). The tool server puts one in the call's context (WithSpanSlot); the span
// that runs the call fills it (FillSpanSlot).
type SpanSlot struct {
	mu          sync.Mutex
	traceparent string
}

type spanSlotKey struct{}

// WithSpanSlot returns ctx with slot in it.
func WithSpanSlot(ctx context.Context, slot *SpanSlot) context.Context {
	return context.WithValue(ctx, spanSlotKey{}, slot)
}

// SpanSlotFrom is the slot ctx carries; nil when none.
func SpanSlotFrom(ctx context.Context) *SpanSlot {
	s, _ := ctx.Value(spanSlotKey{}).(*SpanSlot)
	return s
}

// FillSpanSlot puts the trace context of ctx's span into the slot ctx carries, if it carries one and
// the span is recorded (a span that is not recorded is in no trace a caller could find).
func FillSpanSlot(ctx context.Context) {
	s := SpanSlotFrom(ctx)
	if s == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	tp := Traceparent(ctx)
	s.mu.Lock()
	s.traceparent = tp
	s.mu.Unlock()
}

// Traceparent is what the slot was filled with; "" when nothing filled it.
func (s *SpanSlot) Traceparent() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.traceparent
}
