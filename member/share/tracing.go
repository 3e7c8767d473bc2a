package share

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/runtimetools"
)

// peerFileRoute is the door's route a handle is redeemed at: the url.template of a fetch's span and the
// http.route of the door's, which never carry the handle itself (it is a capability).
const peerFileRoute = "/peer-files/{handle}"

// fetchTrace is the CLIENT span of one fetch of a peer file (DESIGN §17), from the request to the
// peer's door to the last byte stored; the zero value traces nothing.
type fetchTrace struct {
	span   trace.Span
	status int // the door's status code; 0 before it answered
}

// start starts the span of a fetch of h from the door at doorURL, a child of ctx's span (the
// fetch-peer-file call's execute_tool span), on that span's tracer provider, so the fetch is traced
// where the session's spans are; ctx without a span traces nothing, as a session without tracing does.
// The context it returns carries the span, whose traceparent redeem sends to the door.
func (ft *fetchTrace) start(ctx context.Context, member, doorURL string, h *peerfile.Handle) context.Context {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL))
	ctx, ft.span = tracer.Start(ctx, http.MethodGet+" "+peerFileRoute, trace.WithSpanKind(trace.SpanKindClient))
	if !ft.span.IsRecording() {
		return ctx
	}
	full := strings.TrimRight(doorURL, "/") + "/peer-files/REDACTED"
	ft.span.SetAttributes(conv.HTTPRequestMethod.String(http.MethodGet), conv.URLTemplate.String(peerFileRoute),
		conv.URLFull.String(conv.RedactedURL(full)), conv.Member.String(member), conv.PeerFileFrom.String(h.Member),
		conv.PeerFileID.String(h.ID()))
	if u, err := url.Parse(doorURL); err == nil {
		ft.span.SetAttributes(conv.ServerAddress.String(u.Hostname()))
		if p, err := strconv.Atoi(u.Port()); err == nil {
			ft.span.SetAttributes(conv.ServerPort.Int(p))
		}
	}
	return ctx
}

// end ends the span with the door's status code and the fetch's outcome: a fetch refused after the
// request was sent has status Error, its error.type the door's status code (4xx, 5xx) or the refusal's
// reason (digest_mismatch, unreachable, …).
func (ft *fetchTrace) end(err error) {
	if ft.span == nil {
		return
	}
	defer ft.span.End()
	if !ft.span.IsRecording() {
		return
	}
	if ft.status > 0 {
		ft.span.SetAttributes(conv.HTTPResponseStatus.Int(ft.status))
	}
	if err == nil {
		return
	}
	kind := "_OTHER"
	var r *runtimetools.Refusal
	switch {
	case ft.status >= 400:
		kind = strconv.Itoa(ft.status)
	case errors.As(err, &r) && r.Reason != "":
		kind = r.Reason
	}
	ft.span.SetAttributes(conv.ErrorType.String(kind))
	ft.span.SetStatus(codes.Error, err.Error())
}
