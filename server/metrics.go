package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// doorMetrics are the door's own series (DESIGN §8).
type doorMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	paced    prometheus.Counter
	streams  prometheus.Gauge
	dropped  prometheus.Counter
}

func newDoorMetrics(reg prometheus.Registerer) (*doorMetrics, error) {
	m := &doorMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "door_requests_total",
			Help: "JSON-RPC requests to the door, by method and result code (ok, or the JSON-RPC error code)."}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mur", Name: "door_request_duration_seconds",
			Help: "Time the door took to answer a JSON-RPC request.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"method"}),
		paced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mur", Name: "door_refusals_paced_total",
			Help: "Refusals (rejected tasks, requests without a valid token) the door held back because it was refusing faster than its refusal rate."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "mur", Name: "door_streams",
			Help: "SendStreamingMessage and SubscribeToTask streams the door is serving."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mur", Name: "door_streams_dropped_total",
			Help: "Streams closed with an error event because their client read more slowly than the task produced events."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.paced, m.streams, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewRegistry returns the registry of one member's door: the Go and process collectors, and a
// registerer that adds the member label to every series murmur registers on it.
func NewRegistry(member string) (*prometheus.Registry, prometheus.Registerer) {
	return memberRegistry(member, processCollectors())
}

// processCollectors are the Go and process collectors. They describe the process, which every member
// of a formation reports alike, so a formation makes them once and registers them on every door's
// registry.
func processCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// memberRegistry is NewRegistry with the process's collectors given.
func memberRegistry(member string, process []prometheus.Collector) (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(process...)
	return reg, prometheus.WrapRegistererWith(prometheus.Labels{"member": member}, reg)
}
