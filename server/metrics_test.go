package server

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/murmur-run/murmur/member/metrics"
)

// describing counts the calls of its Describe.
type describing struct {
	prometheus.Counter
	calls atomic.Int32
}

func (d *describing) Describe(ch chan<- *prometheus.Desc) {
	d.calls.Add(1)
	d.Counter.Describe(ch)
}

// A door's registry asks nothing of its collectors until it is first scraped, then serves them with the
// member label, beside the process's families.
func TestDoorRegistryRegistersAtTheFirstGather(t *testing.T) {
	gatherer, reg := memberRegistry("m1", processRegistry())
	c := &describing{Counter: prometheus.NewCounter(prometheus.CounterOpts{Name: "mur_probe_total", Help: "A probe."})}
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	c.Inc()
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("the collector was described %d times before any scrape, want 0", n)
	}
	families, err := gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if c.calls.Load() == 0 {
		t.Fatal("the first Gather did not register the collector")
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	probe := got["mur_probe_total"]
	if probe == nil || probe.Metric[0].GetCounter().GetValue() != 1 || probe.Metric[0].Label[0].GetValue() != "m1" {
		t.Fatalf("mur_probe_total: %v, want 1 with member m1", probe)
	}
	if got["go_goroutines"] == nil || got["process_cpu_seconds_total"] == nil {
		t.Error("the process's families are missing")
	}
	// Once made, the registry registers at once.
	late := &describing{Counter: prometheus.NewCounter(prometheus.CounterOpts{Name: "mur_late_total", Help: "Late."})}
	if err := reg.Register(late); err != nil || late.calls.Load() == 0 {
		t.Fatalf("a registration after the first scrape: %v, described %d times", err, late.calls.Load())
	}
	if err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "mur_late_total", Help: "Late."})); err == nil {
		t.Error("a duplicate registration after the first scrape succeeded")
	}
}

// A door of a formation serves the families a registry of every collector serves (NewRegistry's).
func TestDoorRegistryServesWhatOneRegistryWould(t *testing.T) {
	families := func(gatherer prometheus.Gatherer, reg prometheus.Registerer) []string {
		t.Helper()
		series, err := metrics.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		series.ToolCalls.WithLabelValues("shell", "ok").Inc()
		door, err := newDoorMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		door.requests.WithLabelValues("SendMessage", "ok").Add(2)
		got, err := gatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range got {
			for _, m := range f.Metric {
				var labels []string
				for _, l := range m.Label {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				line := f.GetName() + " " + f.GetType().String() + " " + f.GetHelp() + " {" + strings.Join(labels, ",") + "}"
				if !strings.HasPrefix(f.GetName(), "go_") && !strings.HasPrefix(f.GetName(), "process_") {
					// The process's values change between two scrapes, and each series' creation time.
					if m.Counter != nil {
						m.Counter.CreatedTimestamp = nil
					}
					if m.Histogram != nil {
						m.Histogram.CreatedTimestamp = nil
					}
					line += " " + m.String()
				}
				out = append(out, line)
			}
		}
		return out
	}
	one, oneReg := NewRegistry("m1")
	door, doorReg := memberRegistry("m1", processRegistry())
	if diff := cmp.Diff(families(one, oneReg), families(door, doorReg)); diff != "" {
		t.Errorf("families (-one registry +a formation's door):\n%s", diff)
	}
}

// A collector that duplicates another's series fails the scrape (it failed the start before the
// registry was made at the first scrape).
func TestDoorRegistryReportsADuplicateAtTheScrape(t *testing.T) {
	gatherer, reg := memberRegistry("m1", processRegistry())
	for range 2 {
		if err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "mur_twice_total", Help: "Twice."})); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := gatherer.Gather(); err == nil {
			t.Fatal("Gather of a registry with a duplicate succeeded")
		}
	}
}
