package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// doorTracing is what a door traces its JSON-RPC requests with (DESIGN §17).
type doorTracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	start      []trace.SpanStartOption // every request span's: SERVER, rpc.system, the member
}

// newDoorTracing traces on tp; nil means the global provider (the API's no-op one unless the program
// set up tracing).
func newDoorTracing(tp trace.TracerProvider, member string) doorTracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return doorTracing{
		tracer:     tp.Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL)),
		propagator: conv.Propagator(),
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			conv.RPCSystemJSONRPC, conv.RPCSystem.String("jsonrpc"), conv.Member.String(member))},
	}
}

// startRequestSpan starts the SERVER span of one JSON-RPC request and returns the request with it in
// its context. A request carrying a valid traceparent continues the caller's trace (and its baggage
// comes along); a malformed one is ignored, the span starting a trace of its own, and the request is
// served all the same. The span is named once the method is known (nameRequestSpan).
func (d *Door) startRequestSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := r.Context()
	if _, ok := r.Header["Traceparent"]; ok || len(r.Header["Baggage"]) > 0 {
		ctx = d.tracing.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	ctx, span := d.tracing.tracer.Start(ctx, unnamedSpan, d.tracing.start...)
	if !span.SpanContext().IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return r, span // tracing off and no trace to continue: nothing for the context to carry
	}
	return r.WithContext(ctx), span
}

// unnamedSpan is a request span's name until its method is known, and for good when the door does not
// serve it: rpc.system.name, as the conventions say.
const unnamedSpan = "jsonrpc"

// nameRequestSpan names the span after its method (a method the door does not serve keeps the name
// jsonrpc and says _OTHER, as the conventions ask), and notes the task the answer is about, or the
// JSON-RPC error.
func nameRequestSpan(span trace.Span, method string, result any, rpcErr *jsonrpc2.Error) {
	if !span.IsRecording() {
		return
	}
	if knownMethod(method) {
		span.SetName(method)
		span.SetAttributes(conv.RPCMethod.String(method))
	} else {
		span.SetAttributes(conv.RPCMethod.String("_OTHER"))
		if method != "" {
			span.SetAttributes(conv.RPCMethodOriginal.String(a2a.CutID(method)))
		}
	}
	if rpcErr != nil {
		code := strconv.FormatInt(rpcErr.Code, 10)
		span.SetAttributes(conv.RPCResponseStatus.String(code), conv.ErrorType.String(code))
		span.SetStatus(codes.Error, rpcErr.Message)
		return
	}
	switch res := result.(type) {
	case a2a.SendMessageResponse:
		if res.Task != nil {
			noteTask(span, res.Task.ID, res.Task.ContextID, res.Task.Status.State)
		} else if m := res.Message; m != nil {
			noteTask(span, m.TaskID, m.ContextID, "")
		}
	case *a2a.Task:
		noteTask(span, res.ID, res.ContextID, res.Status.State)
	case json.RawMessage: // a stored task, answered as it is kept, or a SendMessage result around one
		noteStoredTask(span, res)
	}
}

// noteStoredTask notes the id, context and state of a task kept as JSON. It reads no further than
// they are (a stored task opens with them, before its history and artifacts) and decodes nothing else:
// a GetTask span costs no decoding of the task it answers with.
func noteStoredTask(span trace.Span, raw json.RawMessage) {
	var id, contextID, state string
	var task []byte // a SendMessage result's {"task": ...}
	topLevel(raw, func(key, value []byte) bool {
		switch string(key) {
		case "task":
			task = value
			return false
		case "id":
			id = jsonString(value)
		case "contextId":
			contextID = jsonString(value)
		case "status":
			topLevel(value, func(key, value []byte) bool {
				if string(key) == "state" {
					state = jsonString(value)
				}
				return state == ""
			})
		}
		return id == "" || contextID == "" || state == ""
	})
	if task != nil {
		noteStoredTask(span, task)
		return
	}
	noteTask(span, a2a.TaskID(id), contextID, a2a.TaskState(state))
}

// topLevel calls each with the keys of the JSON object obj and their values, raw, in order, until each
// returns false or obj ends. Keys with escapes are passed as they are written; malformed JSON ends the
// walk early.
func topLevel(obj []byte, each func(key, value []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := skipValue(obj, i)
		if end < 0 {
			return
		}
		key := obj[i+1 : end-1]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		end = skipValue(obj, i)
		if end < 0 || !each(key, obj[i:end]) {
			return
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at b[i], or -1 when it does not end.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return -1
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return -1
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	if depth == 0 {
		return i // a number, true, false or null at the end
	}
	return -1
}

// jsonString is the value of a JSON string without escapes; "" for anything else.
func jsonString(v []byte) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return ""
	}
	return string(v[1 : len(v)-1])
}

func noteTask(span trace.Span, id a2a.TaskID, contextID string, state a2a.TaskState) {
	attrs := make([]attribute.KeyValue, 0, 3)
	if id != "" {
		attrs = append(attrs, conv.A2ATaskID.String(string(id)))
	}
	if contextID != "" {
		attrs = append(attrs, conv.A2AContextID.String(contextID))
	}
	if state != "" {
		attrs = append(attrs, conv.A2ATaskState.String(string(state)))
	}
	span.SetAttributes(attrs...)
}

// noteTaskID puts on the request's span the task its params name, known before the method runs (an
// unknown task's error is about it too).
func noteTaskID(ctx context.Context, id a2a.TaskID) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() && id != "" {
		span.SetAttributes(conv.A2ATaskID.String(a2a.CutID(string(id))))
	}
}
