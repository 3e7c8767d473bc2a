package wasm

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// endSpan ends a run's span with how the module ended: its result's status, its exit code, the limit
// that stopped it, whether the run compiled it; a run that did not end in a result (Run's error) or
// whose module failed sets the span's status to an error.
func endSpan(span trace.Span, res Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		kind := "_OTHER"
		switch {
		case errors.Is(err, ErrClosed):
			kind = "closed"
		case errors.Is(err, ErrDigest):
			kind = "digest"
		case errors.Is(err, ErrInvalidModule):
			kind = "invalid_module"
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			kind = "canceled"
		}
		span.SetAttributes(conv.ErrorType.String(kind))
		span.SetStatus(codes.Error, firstLine(err.Error()))
		return
	}
	span.SetAttributes(conv.WasmStatus.String(res.Status), conv.WasmExitCode.Int64(int64(res.ExitCode)), conv.WasmCold.Bool(res.Cold))
	if res.Stopped != StopNone {
		span.SetAttributes(conv.WasmStopped.String(string(res.Stopped)))
	}
	if res.Failure != "" {
		span.SetStatus(codes.Error, firstLine(res.Failure))
	}
}

// firstLine is a failure's first line, which says what went wrong (stderr's tail follows it).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
