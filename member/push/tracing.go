package push

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// Tracer is the tracer of the webhook POSTs on tp; nil means the global provider (the API's no-op one
// unless the program set up tracing).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL))
}

// Delivery is one change posted to one webhook: the config, what is posted, and the W3C traceparent of
// the task whose status changed (that of the request that sent it, kept with the task and with the
// change in the outbox; "" when it carried none).
type Delivery struct {
	Config      a2a.TaskPushNotificationConfig
	Body        []byte
	Traceparent string
	Member      string // the member whose task it is: murmur.member
}

// Deliver posts d as Post does, as one CLIENT span of the HTTP client conventions (named POST) in the
// task's trace, whose traceparent the request carries (DESIGN §17): the receiver's own tracing, if it
// has any, continues the task's trace. With tracing off the request carries the task's traceparent all
// the same.
func Deliver(ctx context.Context, tracer trace.Tracer, client *http.Client, d Delivery) error {
	ctx = conv.ContextWithTraceparent(ctx, d.Traceparent)
	ctx, span := tracer.Start(ctx, http.MethodPost, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(conv.HTTPRequestMethod.String(http.MethodPost), conv.URLFull.String(conv.RedactedURL(d.Config.URL)),
			conv.A2ATaskID.String(string(d.Config.TaskID)), conv.PushConfigID.String(d.Config.ID))
		if d.Member != "" {
			span.SetAttributes(conv.Member.String(d.Member))
		}
		if u, err := url.Parse(d.Config.URL); err == nil {
			span.SetAttributes(conv.ServerAddress.String(u.Hostname()))
			if p := portOf(u); p > 0 {
				span.SetAttributes(conv.ServerPort.Int(p))
			}
		}
	}
	status, err := post(ctx, client, d.Config, d.Body)
	if !span.IsRecording() {
		return err
	}
	if status > 0 {
		span.SetAttributes(conv.HTTPResponseStatus.Int(status))
	}
	switch {
	case status >= 300:
		// Not 2xx is a failed delivery (a redirect is not followed): error.type is the status code.
		span.SetAttributes(conv.ErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, err.Error())
	case err != nil:
		kind := "_OTHER"
		switch {
		case errors.Is(err, ErrNotAllowed):
			kind = "not_allowed"
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		case errors.Is(err, context.Canceled):
			kind = "canceled"
		}
		span.SetAttributes(conv.ErrorType.String(kind))
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// portOf is u's port: its own, or its scheme's.
func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch u.Scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
