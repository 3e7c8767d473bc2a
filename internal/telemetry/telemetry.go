package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is not set and the program names none.
const DefaultServiceName = "mur"

// Config is what Start is given.
type Config struct {
	// Getenv reads the OTEL_* variables; nil means os.Getenv. The exporter and the sampler read the rest
	// of theirs (OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER, …) from the process's environment, as
	// the SDK does.
	Getenv func(string) string
	// ServiceName is service.name unless OTEL_SERVICE_NAME says otherwise; "" means DefaultServiceName.
	ServiceName string
	// Version is service.version.
	Version string
	// Logger hears of the SDK's errors, such as an export that failed; nil discards them.
	Logger *slog.Logger
}

// Tracing is the program's tracing: the SDK's provider and its exporter, or nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when the environment asks for no tracing
	protocol string
	endpoint string
}

// Start sets up tracing from the environment. When an OTLP endpoint is set (and OTEL_SDK_DISABLED is not
// true, nor OTEL_TRACES_EXPORTER none), it builds the SDK's provider exporting over OTLP (http/protobuf,
// or grpc when OTEL_EXPORTER_OTLP_PROTOCOL says so) in batches, and makes it and the W3C Trace Context
// propagator the global ones; otherwise it sets up nothing and returns a Tracing that is off. An error
// says which variable is wrong and what it takes.
func Start(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return &Tracing{}, nil
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "", "otlp":
	case "none":
		return &Tracing{}, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: mur exports traces over OTLP only; set it to otlp, or none for no traces", v)
	}
	endpoint, which := endpointOf(getenv)
	if endpoint == "" {
		return &Tracing{}, nil
	}
	protocol := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = "http/protobuf"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s=%q is not a URL the exporter can reach: give the collector's address with its scheme, such as http://localhost:4318 (http/protobuf) or http://localhost:4317 (grpc)", which, endpoint)
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		if which == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			endpoint = strings.TrimRight(endpoint, "/") + "/v1/traces" // the signal's path, as the spec says
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	case "grpc":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: mur exports traces over http/protobuf (the default) or grpc; set one of them", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter to %s: %w", endpoint, err)
	}
	res, err := newResource(ctx, cfg, getenv)
	if err != nil {
		_ = exp.Shutdown(ctx) // it exported nothing yet: the error returned is the one to report
		return nil, err
	}
	// The sampler is the SDK's default unless OTEL_TRACES_SAMPLER (and _ARG) names another, which the SDK
	// reads itself: parentbased_always_on, so a caller's sampling decision is kept.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(conv.Propagator())
	return &Tracing{provider: tp, protocol: protocol, endpoint: endpoint}, nil
}

// endpointOf is the OTLP endpoint the environment names for traces, and the variable it came from.
func endpointOf(getenv func(string) string) (string, string) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v, k
		}
	}
	return "", ""
}

func firstSet(getenv func(string) string, keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

// newResource describes the process: service.name (OTEL_SERVICE_NAME, else a service.name of
// OTEL_RESOURCE_ATTRIBUTES, else the program's name for itself, else mur), service.version, the SDK, and
// the rest of OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, cfg Config, getenv func(string) string) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	opts := []resource.Option{resource.WithAttributes(semconv.ServiceName(name)), resource.WithTelemetrySDK(), resource.WithFromEnv()}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceName(v)))
	}
	if cfg.Version != "" {
		opts = append(opts, resource.WithAttributes(semconv.ServiceVersion(cfg.Version)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: describing the process for its spans: %w (check OTEL_RESOURCE_ATTRIBUTES: key=value pairs separated by commas)", err)
	}
	if res == nil {
		res = resource.Default()
	}
	return res, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// TracerProvider is the provider spans are started on; nil when tracing is off (the global no-op one
// serves then).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.provider
}

// Where says where spans go, for the log: the protocol and the endpoint; "" when tracing is off.
func (t *Tracing) Where() string {
	if !t.Enabled() {
		return ""
	}
	return t.protocol + " " + t.endpoint
}

// Shutdown exports the spans not yet sent and stops the exporter, waiting until ctx ends at most. It is
// a no-op when tracing is off, and after the first call.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing the last spans to %s: %w", t.endpoint, err)
	}
	return nil
}
