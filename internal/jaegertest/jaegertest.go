// Package jaegertest runs a real trace collector for tests: Jaeger v2 (the OpenTelemetry Collector with
// Jaeger's storage and query extensions), built from the Go module proxy by tools/jaeger/build, listening
// on loopback only, taking OTLP over HTTP and keeping spans in memory; a test exports to it and reads a
// trace back over Jaeger's query API, as a person debugging a formation would see it.
//
// The binary is the one MUR_JAEGER names, else the one tools/jaeger/build leaves in the user's cache.
// Without it a test is skipped with how to build it, except under CI (CI set), where it fails.
//
// Imports: the standard library only.
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Version is the Jaeger module tools/jaeger/go.mod pins (a test checks they agree).
const Version = "v1.75.0"

// Jaeger is one running collector.
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver, for OTEL_EXPORTER_OTLP_ENDPOINT.
	OTLP  string
	query string // its query API's base URL
	log   *bytes.Buffer
}

// Binary is the path of the Jaeger binary, or "" and why there is none.
func Binary() (string, string) {
	if p := os.Getenv("MUR_JAEGER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Sprintf("MUR_JAEGER=%s: %v", p, err)
		}
		return p, ""
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err.Error()
	}
	p := filepath.Join(dir, "murmur", "jaeger-"+Version)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Sprintf("no Jaeger at %s: build it with tools/jaeger/build (about six minutes the first time), or set MUR_JAEGER", p)
	}
	return p, ""
}

// config is the collector's: OTLP/HTTP in, memory storage, the query API; no metrics of its own (no
// fixed port) and its logs at warn.
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
extensions:
  jaeger_query:
    storage: {traces: mem}
    http: {endpoint: "127.0.0.1:%d"}
    grpc: {endpoint: "127.0.0.1:%d"}
  jaeger_storage:
    backends:
      mem: {memory: {max_traces: 10000}}
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:%d"}
processors:
  batch: {timeout: 100ms}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`

// Start runs a collector for t, stopped when t ends.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin, why := Binary()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: %s", why)
		}
		t.Skip(why)
	}
	var lastErr error
	for range 3 { // a port picked free may be taken before Jaeger binds it
		j, err := start(t, bin)
		if err == nil {
			return j
		}
		lastErr = err
	}
	t.Fatalf("jaeger: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string) (*Jaeger, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, ports[0], ports[1], ports[2]), 0o644); err != nil {
		return nil, err
	}
	j := &Jaeger{OTLP: fmt.Sprintf("http://127.0.0.1:%d", ports[2]), query: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), log: &bytes.Buffer{}}
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	cmd.Stdout, cmd.Stderr = j.log, j.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill() // it may have exited already (ESRCH): nothing to do
		_ = <-exited           // "signal: killed", the end Kill asked for
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("exited (%v) before it was ready:\n%s", err, j.log)
		default:
		}
		if ready(j.query+"/api/services") && ready(j.OTLP+"/v1/traces") {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("not ready after 60 s:\n%s", j.log)
		}
	}
	t.Cleanup(stop)
	return j, nil
}

// ready says whether url answers at all (the OTLP receiver answers a GET with 405).
func ready(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Span is one span as Jaeger's query API gives it back.
type Span struct {
	TraceID, SpanID string
	Parent          string // the span it is CHILD_OF, "" for a root
	Name            string
	Kind            string // span.kind: server, client, internal, …
	Service         string
	Tags            map[string]string // every attribute, as text
	Events          []Event
	Start           time.Time
	Duration        time.Duration
}

// Event is a span event (a log in Jaeger's terms).
type Event struct {
	Name string
	Tags map[string]string
}

// Trace returns the spans of trace id as stored now (none when it is not there yet).
func (j *Jaeger) Trace(ctx context.Context, id string) ([]Span, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.query+"/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %s", id, resp.Status)
	}
	var body struct {
		Data []struct {
			Spans []struct {
				TraceID       string `json:"traceID"`
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				References    []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
				StartTime int64 `json:"startTime"` // µs
				Duration  int64 `json:"duration"`  // µs
				Tags      []tag `json:"tags"`
				Logs      []struct {
					Fields []tag `json:"fields"`
				} `json:"logs"`
				ProcessID string `json:"processID"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/traces/%s: %w", id, err)
	}
	var out []Span
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, Name: s.OperationName, Service: tr.Processes[s.ProcessID].ServiceName,
				Tags: tags(s.Tags), Start: time.UnixMicro(s.StartTime), Duration: time.Duration(s.Duration) * time.Microsecond}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.Parent = r.SpanID
				}
			}
			sp.Kind = sp.Tags["span.kind"]
			if sp.Kind == "" {
				sp.Kind = "internal"
			}
			for _, l := range s.Logs {
				m := tags(l.Fields)
				sp.Events = append(sp.Events, Event{Name: m["event"], Tags: m})
			}
			out = append(out, sp)
		}
	}
	return out, nil
}

type tag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

func tags(ts []tag) map[string]string {
	m := make(map[string]string, len(ts))
	for _, t := range ts {
		switch v := t.Value.(type) {
		case string:
			m[t.Key] = v
		case float64:
			m[t.Key] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			m[t.Key] = strings.TrimSpace(fmt.Sprint(v))
		}
	}
	return m
}
