// Package otlptest is an OTLP/HTTP trace receiver for tests: a collector's receiving end on loopback,
// which decodes what an exporter sends (protobuf, gzipped or not) and keeps the spans to read back.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for tests.
type Span struct {
	Service  string // the resource's service.name
	Name     string
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root span
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]any // string, int64, float64 or bool values
	Status   tracepb.Status_StatusCode
}

// Receiver is a running OTLP/HTTP receiver. Its methods are safe for concurrent use.
type Receiver struct {
	// URL is the receiver's base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT: spans are posted to
	// URL/v1/traces.
	URL  string
	srv  *httptest.Server // OTLP/HTTP; nil for OTLP/gRPC
	grpc *grpc.Server     // OTLP/gRPC; nil for OTLP/HTTP
	keep bool             // false: what arrives is decoded and counted, and not kept (benchmarks)

	mu    sync.Mutex // guards the fields below
	spans []Span
	count int
}

// NewReceiver starts a receiver on loopback that keeps every span it receives.
func NewReceiver() *Receiver { return start(true) }

// NewCountingReceiver starts a receiver on loopback that decodes and counts spans but keeps none.
func NewCountingReceiver() *Receiver { return start(false) }

func start(keep bool) *Receiver {
	r := &Receiver{keep: keep}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// NewGRPCReceiver starts an OTLP/gRPC receiver on loopback that keeps every span it receives; its URL
// is the value of OTEL_EXPORTER_OTLP_ENDPOINT with OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
func NewGRPCReceiver() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{keep: true, grpc: grpc.NewServer(), URL: "http://" + ln.Addr().String()}
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	// Serve returns nil once Close stops it; a listener that failed before leaves the test without the
	// spans it waits for, which the test reports.
	go func() { _ = r.grpc.Serve(ln) }()
	return r, nil
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.add(in)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Close stops the receiver and closes its connections, so the exporter's end of them ends too.
func (r *Receiver) Close() {
	if r.grpc != nil {
		r.grpc.Stop()
		return
	}
	r.srv.CloseClientConnections()
	r.srv.Close()
}

// Spans returns the spans received so far, in the order they arrived.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Count is how many spans have arrived.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "post spans to /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &in); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&in)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) add(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.count += len(ss.Spans)
			if !r.keep {
				continue
			}
			for _, s := range ss.Spans {
				sp := Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), Kind: s.Kind, Attrs: map[string]any{}, Status: s.GetStatus().GetCode()}
				if len(s.ParentSpanId) > 0 {
					sp.ParentID = hex.EncodeToString(s.ParentSpanId)
				}
				for _, kv := range s.Attributes {
					sp.Attrs[kv.Key] = value(kv.Value)
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	}
	return v.String()
}
