package server

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(processCollectors()...)
	return reg, prometheus.WrapRegistererWith(prometheus.Labels{"member": member}, reg)
}

// processCollectors are the Go and process collectors. They describe the process, which every member
// of a formation reports alike.
func processCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// processRegistry is a formation's registry of the Go and process collectors, which every door's
// /metrics serves beside its member's series (memberRegistry).
func processRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(processCollectors()...)
	return reg
}

// memberRegistry is what NewRegistry returns for a member of a formation whose process registry is
// process: what its door's /metrics gathers, and the registerer, with the member label, of its series.
func memberRegistry(member string, process prometheus.Gatherer) (prometheus.Gatherer, prometheus.Registerer) {
	reg := &doorRegistry{process: process}
	return reg, prometheus.WrapRegistererWith(prometheus.Labels{"member": member}, reg)
}

// doorRegistry is a door's registry of its member's series, made at the first scrape. Registering a
// collector asks it to describe its series and checks them against the others' (a goroutine, a map of
// every series' hashes, each description remade with the member label): at a thousand members a tenth
// of the formation's start, for doors most of which are never scraped. Until the first Gather (or
// Unregister), Register keeps the collectors in order; then they are registered on a registry as they
// would have been, and Gather serves that registry and the formation's process registry together, the
// same families a registry of all of them serves. A collector that cannot be registered (one that
// duplicates another's series: a mistake in murmur, which every test of /metrics would show) fails
// that Gather, and every one after it, rather than the member's start.
type doorRegistry struct {
	process prometheus.Gatherer // the Go and process collectors, every door's

	mu      sync.Mutex
	reg     *prometheus.Registry   // nil until made
	pending []prometheus.Collector // registered before reg was made, in order
	err     error                  // what registering pending on reg failed with
}

// Register keeps c for the registry the first Gather makes, or registers it there once it is made.
func (r *doorRegistry) Register(c prometheus.Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil {
		r.pending = append(r.pending, c)
		return nil
	}
	return r.reg.Register(c)
}

// MustRegister registers each of cs, and panics at the first that fails.
func (r *doorRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister makes the registry and unregisters c from it.
func (r *doorRegistry) Unregister(c prometheus.Collector) bool {
	reg, _ := r.made()
	return reg.Unregister(c)
}

// Gather gathers the process's families and the member's, the registry made at the first call.
func (r *doorRegistry) Gather() ([]*dto.MetricFamily, error) {
	reg, err := r.made()
	if err != nil {
		return nil, err
	}
	return prometheus.Gatherers{r.process, reg}.Gather()
}

// made returns the registry of the collectors registered so far, made at the first call, and the error
// of registering them.
func (r *doorRegistry) made() (*prometheus.Registry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil {
		r.reg = prometheus.NewRegistry()
		for _, c := range r.pending {
			if err := r.reg.Register(c); err != nil {
				r.err = errors.Join(r.err, err)
			}
		}
		r.pending = nil
	}
	return r.reg, r.err
}
