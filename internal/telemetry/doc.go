// Package telemetry sets up tracing for the program (DESIGN §17): the OpenTelemetry SDK's tracer provider,
// its OTLP exporter and the W3C Trace Context propagator, from the standard OTEL_* variables. It is the only
// package that uses the SDK; every other starts spans through the OpenTelemetry API (package conv holds the
// names they use), on the provider it is given or the global one.
//
// Nothing is set up, and the global provider stays the API's no-op one, unless
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set and OTEL_SDK_DISABLED is not
// true. Start is called once, by main's run, before the members start; Shutdown once, after they have
// stopped, to flush what is left.
package telemetry
