package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/murmur-run/murmur/internal/telemetry"
)

// startTracing sets up tracing from the OTEL_* variables (docs/tracing.md): nothing without an OTLP
// endpoint. Its service.name is the member's for mur member, mur for mur run, unless OTEL_SERVICE_NAME
// says otherwise. A variable it cannot serve is a usage error.
func startTracing(ctx context.Context, only []string, getenv func(string) string, log *slog.Logger) (*telemetry.Tracing, error) {
	name := telemetry.DefaultServiceName
	if len(only) == 1 {
		name = only[0]
	}
	t, err := telemetry.Start(ctx, telemetry.Config{Getenv: getenv, ServiceName: name, Version: version, Logger: log})
	if err != nil {
		return nil, usageError{err}
	}
	if t.Enabled() {
		log.Info("tracing on", "export", t.Where())
	}
	return t, nil
}

// stopTracing sends the spans not yet sent, waiting 5 seconds at most: a collector that is down costs
// the exit no more, and only a warning.
func stopTracing(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("the last spans were not all exported", "err", err)
	}
}
