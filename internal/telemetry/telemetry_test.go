package telemetry

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/internal/telemetry/otlptest"
)

// The exporter's connections and the batcher's goroutine end with Shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func TestStartWithoutAnEndpointSetsUpNothing(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"no OTEL variables":   {},
		"a service name only": {"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"OTEL_SDK_DISABLED":   {"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"exporter none":       {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"},
	} {
		t.Run(name, func(t *testing.T) {
			global, propagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
			tr, err := Start(context.Background(), Config{Getenv: env(vars)})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Enabled() || tr.TracerProvider() != nil || tr.Where() != "" {
				t.Errorf("tracing is on: %s", tr.Where())
			}
			if otel.GetTracerProvider() != global || otel.GetTextMapPropagator() != propagator {
				t.Error("Start changed the global provider or propagator with tracing off")
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestStartRefusesWhatItCannotServe(t *testing.T) {
	for name, tc := range map[string]struct {
		vars map[string]string
		want string
	}{
		"http/json": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			"set one of them"},
		"console exporter": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "console"},
			"set it to otlp"},
		"no scheme": {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "127.0.0.1:4318"},
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=\"127.0.0.1:4318\" is not a URL"},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := Start(context.Background(), Config{Getenv: env(tc.vars)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error saying %q", err, tc.want)
			}
			if tr != nil {
				t.Error("a Tracing came with the error")
			}
		})
	}
}

// exportOne starts tracing with vars, ends one span with an attribute and shuts tracing down: the span
// is sent by Shutdown, not before (the batcher's delay is seconds).
func exportOne(t *testing.T, vars map[string]string) {
	t.Helper()
	tr, err := Start(context.Background(), Config{Getenv: env(vars), ServiceName: "lead", Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || otel.GetTracerProvider() != tr.TracerProvider() {
		t.Fatal("tracing is off, or its provider is not the global one")
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "SendMessage", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("a2a.task.id", "tsk_1")))
	// The global propagator is W3C Trace Context: what goes out is this span's traceparent.
	h := http.Header{}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	if want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"; h.Get("traceparent") != want {
		t.Errorf("traceparent %q, want %q", h.Get("traceparent"), want)
	}
	span.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(sctx); err != nil {
		t.Errorf("a second Shutdown: %v", err)
	}
}

func checkOne(t *testing.T, got []otlptest.Span, service string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("%d spans arrived, want 1: %+v", len(got), got)
	}
	s := got[0]
	if s.Name != "SendMessage" || s.Service != service || s.Attrs["a2a.task.id"] != "tsk_1" || s.ParentID != "" || len(s.TraceID) != 32 {
		t.Errorf("the span that arrived: %+v", s)
	}
}

func TestSpansArriveOverOTLPHTTPAfterShutdown(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	exportOne(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL})
	checkOne(t, rcv.Spans(), "lead") // the program's name for itself

	// The signal's own endpoint is used as it is; OTEL_SERVICE_NAME names the service.
	rcv2 := otlptest.NewReceiver()
	defer rcv2.Close()
	exportOne(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv2.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SERVICE_NAME": "svc"})
	checkOne(t, rcv2.Spans(), "svc")
}

func TestSpansArriveOverOTLPGRPC(t *testing.T) {
	rcv, err := otlptest.NewGRPCReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	exportOne(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	checkOne(t, rcv.Spans(), "lead")
}
