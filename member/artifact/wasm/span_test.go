package wasm

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/murmur-run/murmur/member/spans/nest"
)

// A run is a span "murmur.wasm {module}", the child of the span its context carries, with how the module
// ended; each host call is an event on it with the function, the answer's length and a refusal's token,
// and nothing of the request or the answer. A run with no recording span above it records none.
func TestRunSpan(t *testing.T) {
	r := newRunner(t, Config{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	for _, tc := range []struct {
		name, in, answer string
		event            map[string]string
	}{
		{"an answer", `{"infer": {"messages": [{"role": "user", "text": "hi"}]}}`, `{"text": "hello", "usage": {"input": 3, "output": 1}}`,
			map[string]string{"murmur.host_call.function": "run_inference"}},
		{"a refusal", `{"pull": "local/x"}`, `{"error": "not-granted: no pulls here"}`,
			map[string]string{"murmur.host_call.function": "manage_pull", "murmur.host_call.refusal": "not-granted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			ctx, parent := tp.Tracer("test").Start(nest.WithMember(context.Background(), "m"), "execute_tool host")
			call := hostCallOf(t, tc.in, answering(tc.answer))
			res, err := r.Run(ctx, call)
			parent.End()
			if err != nil || res.Status != StatusOK {
				t.Fatalf("%+v %v", res, err)
			}
			ended := rec.Ended()
			if len(ended) != 2 || ended[0].Name() != "murmur.wasm host" {
				t.Fatalf("%d spans, want the run's and its parent", len(ended))
			}
			run := ended[0]
			if run.Parent().SpanID() != parent.SpanContext().SpanID() || run.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("the run's span is not the child of its call's")
			}
			want := map[string]string{"murmur.wasm.module": "host", "murmur.wasm.digest": call.Digest, "murmur.wasm.status": "ok",
				"murmur.wasm.exit_code": "0", "murmur.wasm.cold": attrs(run)["murmur.wasm.cold"], "murmur.member": "m"}
			if diff := cmp.Diff(want, attrs(run)); diff != "" {
				t.Errorf("the run's attributes (-want +got):\n%s", diff)
			}
			var events []map[string]string
			for _, e := range run.Events() {
				m := map[string]string{"name": e.Name}
				for _, kv := range e.Attributes {
					m[string(kv.Key)] = kv.Value.Emit()
				}
				events = append(events, m)
			}
			tc.event["name"], tc.event["murmur.host_call.answer_bytes"] = "murmur.host_call", strconv.Itoa(len(tc.answer))
			if diff := cmp.Diff([]map[string]string{tc.event}, events); diff != "" {
				t.Errorf("the run's events (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a failure", func(t *testing.T) {
		rec.Reset()
		ctx, parent := tp.Tracer("test").Start(context.Background(), "execute_tool tool")
		res, err := r.Run(ctx, toolCall(t, map[string]any{"op": "exit"}))
		parent.End()
		if err != nil || res.Failure == "" {
			t.Fatalf("%+v %v", res, err)
		}
		run := rec.Ended()[0]
		a := attrs(run)
		if run.Name() != "murmur.wasm tool" || a["murmur.wasm.status"] != "error" || a["murmur.wasm.exit_code"] != "3" ||
			run.Status().Code.String() != "Error" || run.Status().Description != "The module exited with code 3 without writing a result." {
			t.Errorf("the failed run's span %q: %v, status %v", run.Name(), a, run.Status())
		}
	})
	t.Run("no span above", func(t *testing.T) {
		rec.Reset()
		mustRun(t, r, hostCallOf(t, `{"pull": "local/x"}`, answering(`{}`)))
		if n := len(rec.Started()) + len(rec.Ended()); n != 0 {
			t.Errorf("%d spans of a run with no span above it", n)
		}
	})
}
