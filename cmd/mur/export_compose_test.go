package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of a compose file the tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		Profiles    []string          `yaml:"profiles"`
		Expose      []string          `yaml:"expose"`
		DependsOn   []string          `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestExportComposeLaysOutEveryMember(t *testing.T) {
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	urls := "lead=http://lead:7101,worker=http://worker:7102"
	for name, port := range map[string]string{"lead": "7101", "worker": "7102"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if want := []string{"member", "--roster", "/formation/roster.yaml", "--name", name}; !cmp.Equal(s.Command, want) {
			t.Errorf("%s: command %q, want %q", name, s.Command, want)
		}
		if s.Environment["MUR_DOOR_URLS"] != urls || s.Environment["MUR_LISTEN"] != "0.0.0.0:"+port {
			t.Errorf("%s: environment %v", name, s.Environment)
		}
		for _, tok := range []string{"MUR_FORMATION_TOKEN", "MUR_OPERATOR_TOKEN"} {
			if !strings.HasPrefix(s.Environment[tok], "${"+tok+":?") {
				t.Errorf("%s: %s = %q, want it required from the environment or .env", name, tok, s.Environment[tok])
			}
		}
		if got := s.Environment["MUR_CONTROL_TOKEN"]; got != "${MUR_CONTROL_TOKEN:-}" {
			t.Errorf("%s: MUR_CONTROL_TOKEN = %q, want it handed over from the environment or .env when set", name, got)
		}
		if want := []string{"./examples/hello:/formation:ro", name + "-data:/data"}; !cmp.Equal(s.Volumes, want) {
			t.Errorf("%s: volumes %q, want %q", name, s.Volumes, want)
		}
		if _, ok := c.Volumes[name+"-data"]; !ok {
			t.Errorf("no named volume %s-data", name)
		}
		if want := []string{"CMD", "mur", "health", "--door", "http://127.0.0.1:" + port}; !cmp.Equal(s.Healthcheck.Test, want) {
			t.Errorf("%s: health check %q, want %q", name, s.Healthcheck.Test, want)
		}
	}
	if p := c.Services["lead"].Ports; len(p) != 1 || p[0] != "${MUR_ENTRY_ADDR:-127.0.0.1:7101}:7101" {
		t.Errorf("lead (the entry) publishes %q", p)
	}
	if p := c.Services["worker"].Ports; len(p) != 0 {
		t.Errorf("worker publishes %q; only the entry member should", p)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if s := c.Services[name]; !cmp.Equal(s.Profiles, []string{"monitoring"}) {
			t.Errorf("%s: profiles %q, want [monitoring]", name, s.Profiles)
		}
	}
}

// exportCompose runs mur export compose with args on the roster at path and decodes what it writes.
func exportCompose(t *testing.T, path string, args ...string) composeFile {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), append([]string{"export", "compose", "--roster", path}, args...), noEnv, &out, &errb); err != nil {
		t.Fatalf("mur export compose %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	var c composeFile
	if err := yaml.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return c
}

// With --monitoring, the profile monitoring holds Jaeger beside Prometheus and Grafana: its OTLP ports
// in the compose network only, its UI on the loopback, its image pinned to a 2.x and overridable. Every
// member (each replica too) sends its spans there under its own service name, and stays outside the
// profile with no dependency on it, so the members start without it; without --monitoring, no member
// is told of a collector.
func TestExportComposeMonitoringWiresJaegerIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
	}{
		{"hello", copyHello(t, t.TempDir())},
		{"replicas", exportReplicasRoster(t, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exportCompose(t, tc.path, "--monitoring")
			j, ok := c.Services["jaeger"]
			if !ok {
				t.Fatalf("no jaeger service: %v", keys(c.Services))
			}
			if !strings.HasPrefix(j.Image, "${JAEGER_IMAGE:-jaegertracing/jaeger:2.") || !strings.HasSuffix(j.Image, "}") || strings.Contains(j.Image, "latest") {
				t.Errorf("jaeger: image %q, want a pinned jaegertracing/jaeger:2.x that JAEGER_IMAGE overrides", j.Image)
			}
			if !cmp.Equal(j.Profiles, []string{"monitoring"}) {
				t.Errorf("jaeger: profiles %q, want [monitoring]", j.Profiles)
			}
			if want := []string{"${JAEGER_ADDR:-127.0.0.1:16686}:16686"}; !cmp.Equal(j.Ports, want) {
				t.Errorf("jaeger: ports %q, want only the UI, on the loopback: %q", j.Ports, want)
			}
			if want := []string{"4317", "4318"}; !cmp.Equal(j.Expose, want) {
				t.Errorf("jaeger: expose %q, want OTLP's ports %q in the compose network", j.Expose, want)
			}
			if g := c.Services["grafana"]; !slices.Contains(g.DependsOn, "jaeger") || !slices.Contains(g.DependsOn, "prometheus") {
				t.Errorf("grafana: depends_on %q, want prometheus and jaeger, its data sources", g.DependsOn)
			}
			members := 0
			for name, s := range c.Services {
				if slices.Contains([]string{"prometheus", "grafana", "jaeger"}, name) {
					continue
				}
				members++
				if got := s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "http://jaeger:4318" {
					t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q, want http://jaeger:4318", name, got)
				}
				if got := s.Environment["OTEL_SERVICE_NAME"]; got != name {
					t.Errorf("%s: OTEL_SERVICE_NAME = %q, want %s", name, got, name)
				}
				if len(s.Profiles) != 0 || len(s.DependsOn) != 0 {
					t.Errorf("%s: profiles %q, depends_on %q; a member must start without the monitoring profile", name, s.Profiles, s.DependsOn)
				}
			}
			if members != 2 {
				t.Errorf("%d member services, want lead and worker", members)
			}

			c = exportCompose(t, tc.path)
			for name, s := range c.Services {
				for k := range s.Environment {
					if strings.HasPrefix(k, "OTEL_") {
						t.Errorf("without --monitoring, %s has %s", name, k)
					}
				}
			}
			if _, ok := c.Services["jaeger"]; ok {
				t.Error("a jaeger service without --monitoring")
			}
		})
	}
}

// The environment the compose file gives a member turns tracing on in mur member, towards the profile's
// Jaeger over OTLP/HTTP, and starting it reaches for no collector: a member whose Jaeger is not up
// starts all the same (an export that finds none is a warning, internal/telemetry).
func TestExportComposeMonitoringEnvironmentStartsTracing(t *testing.T) {
	c := exportCompose(t, copyHello(t, t.TempDir()), "--monitoring")
	env := c.Services["worker"].Environment
	getenv := func(k string) string {
		if strings.HasPrefix(k, "OTEL_") {
			return env[k]
		}
		return ""
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr, err := startTracing(context.Background(), []string{"worker"}, getenv, log)
	if err != nil {
		t.Fatalf("mur member with the compose file's environment: %v", err)
	}
	defer stopTracing(tr, log)
	if want := "http/protobuf http://jaeger:4318/v1/traces"; tr.Where() != want {
		t.Errorf("tracing exports to %q, want %q", tr.Where(), want)
	}
}

// The checked-in Grafana provisioning has a data source for the compose file's Jaeger.
func TestGrafanaHasJaegerDataSource(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/provisioning/datasources/jaeger.yml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Datasources) != 1 || p.Datasources[0].Type != "jaeger" || p.Datasources[0].URL != "http://jaeger:16686" || p.Datasources[0].UID != "jaeger" {
		t.Errorf("deploy/grafana/provisioning/datasources/jaeger.yml: %+v", p)
	}
}
