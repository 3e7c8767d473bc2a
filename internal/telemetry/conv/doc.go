// Package conv holds the names murmur's spans carry, in one place: the OpenTelemetry semantic conventions
// v1.41.0 (the GenAI and RPC attributes, through go.opentelemetry.io/otel/semconv/v1.41.0, the newest
// semconv package of otel v1.47.0 that still has the GenAI ones), the A2A attributes those lack, and
// murmur's own; and the propagator every hop uses, W3C Trace Context with Baggage (DESIGN §17).
//
// It uses the OpenTelemetry API alone, as every package that starts spans does; the SDK and the
// exporters are set up in package telemetry, once, by the program.
package conv
