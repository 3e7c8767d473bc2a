package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/otlptest"
)

// BenchmarkTracing runs, in one process and one run, the same requests against three doors in front of
// the same member: tracing off (the global provider, the API's no-op one, as mur runs without OTEL_*
// variables), tracing on with a discarding exporter (the SDK's provider and batcher, every span built and
// thrown away), and tracing on exporting over OTLP/HTTP to a receiver on loopback that decodes every
// batch. The three take turns over versusRounds rounds, each first in one of them, so the machine's
// noise falls on all of them, and each reports its requests per second and its ratio to "off". It never fails for slowness:
//
//	go test -run '^$' -bench Tracing -benchtime 3000x ./server/
//
// The calls: GetTask of a completed task (one server span); SendMessage blocking, answered once its task
// has run, so each request pays for the spans of its task's run too (invoke_agent, chat).
func BenchmarkTracing(b *testing.B) {
	rcv := otlptest.NewCountingReceiver()
	b.Cleanup(rcv.Close)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	targets := []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", nil},
		{"discard", sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
		{"otlp", sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))},
	}
	doors := make([]*fixture, len(targets))
	for i, tg := range targets {
		if tp, ok := tg.tp.(*sdktrace.TracerProvider); ok {
			b.Cleanup(func() { tp.Shutdown(context.Background()) })
		}
		doors[i] = startDoorWith(b, map[string]string{"murmur.yaml": benchAgent}, doorOptions{tracerProvider: tg.tp})
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	getTask := make([]func(int) []byte, len(doors))
	for i, d := range doors {
		id := sendForID(b, hc, d.url+"/a2a", false)
		getTask[i] = func(int) []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, id)
		}
	}
	send := func(i int) []byte { return sendBody(i, false) }
	for _, call := range []string{"GetTask", "SendBlocking"} {
		const clients = 16
		b.Run(fmt.Sprintf("%s/clients=%d", call, clients), func(b *testing.B) {
			took := make([]time.Duration, len(doors))
			lat := make([][]time.Duration, len(doors))
			per := max(1, b.N/versusRounds)
			// Each round starts with another target: the first in a round runs measurably slower.
			for round := range versusRounds {
				for k := range doors {
					i := (round + k) % len(doors)
					d := doors[i]
					body := send
					if call == "GetTask" {
						body = getTask[i]
					}
					took[i] += drive(b, hc, d.url+"/a2a", clients, per, body, &lat[i])
				}
			}
			n := float64(per * versusRounds)
			off := n / took[0].Seconds()
			for i, tg := range targets {
				rps := n / took[i].Seconds()
				slices.Sort(lat[i])
				b.ReportMetric(rps, tg.name+"-req/s")
				b.ReportMetric(pct(lat[i], 0.50), tg.name+"-p50-µs")
				if i > 0 {
					b.ReportMetric(rps/off, tg.name+"/off")
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
	// What the receiver got is what an exporter under this load delivers (the batcher drops spans when
	// its queue is full); it is reported, not required.
	if tp, ok := targets[2].tp.(*sdktrace.TracerProvider); ok {
		tp.ForceFlush(context.Background())
	}
	b.Logf("the OTLP receiver decoded %d spans", rcv.Count())
}
