package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// scrapeFile is the part of a Prometheus configuration the tests read.
type scrapeFile struct {
	Global        map[string]string `yaml:"global"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
		RelabelConfigs []struct {
			TargetLabel string `yaml:"target_label"`
			Replacement string `yaml:"replacement"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

// dnsTarget is one dns_sd_configs entry, as the tests compare them.
type dnsTarget struct {
	Names []string
	Type  string
	Port  int
}

// exportReplicasRoster writes the hello example to a temporary directory with lead on PostgreSQL as
// replicas (3), and worker too when both, as replicas (2); it returns the roster's path.
func exportReplicasRoster(t *testing.T, both bool) string {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, helloDir, dir)
	path := filepath.Join(dir, "roster.yaml")
	b, _ := os.ReadFile(path)
	body := strings.Replace(string(b), "    capsule: ./lead\n", "    capsule: ./lead\n    store: postgres://murmur@db:5432/lead\n    replicas: 3\n", 1)
	if both {
		body = strings.Replace(body, "    capsule: ./worker\n", "    capsule: ./worker\n    store: postgres://murmur@db:5432/worker\n    replicas: 2\n", 1)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exportScrape runs mur export prometheus on the roster at path, decodes what it writes, and checks it
// with promtool where Debian's prometheus package put one.
func exportScrape(t *testing.T, path string) (scrapeFile, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "prometheus", "--roster", path}, noEnv, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var f scrapeFile
	dec := yaml.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decoding the scrape configuration (a field the test does not know is an error): %v\n%s", err, out.String())
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		file := filepath.Join(t.TempDir(), "prometheus.yml")
		os.WriteFile(file, out.Bytes(), 0o644)
		if res, err := exec.Command(promtool, "check", "config", file).CombinedOutput(); err != nil {
			t.Errorf("promtool check config: %v\n%s\n%s", err, res, out.String())
		}
	} else {
		t.Log("no promtool (Debian's prometheus package): the configuration is decoded, not checked by Prometheus")
	}
	return f, out.String()
}

// A member run as replicas sits behind one service name that resolves to every replica: the scrape
// configuration finds its replicas by a DNS lookup of that name (dns_sd_configs, type A, the member's
// port), so each replica is scraped on its own, while a member of one process stays a static target.
// Every target gets the formation label. The compose file's monitoring header says so; the k8s
// manifests already have Prometheus scrape each pod by its annotations.
func TestExportReplicasScrapedEach(t *testing.T) {
	path := exportReplicasRoster(t, false)
	f, text := exportScrape(t, path)
	if len(f.ScrapeConfigs) != 1 {
		t.Fatalf("%d scrape configs, want 1:\n%s", len(f.ScrapeConfigs), text)
	}
	job := f.ScrapeConfigs[0]
	if job.JobName != "mur" || job.MetricsPath != "/metrics" {
		t.Errorf("job %q at %q, want mur at /metrics", job.JobName, job.MetricsPath)
	}
	if len(job.StaticConfigs) != 1 || !cmp.Equal(job.StaticConfigs[0].Targets, []string{"worker:7102"}) ||
		job.StaticConfigs[0].Labels["formation"] != "hello" {
		t.Errorf("static targets %+v; want worker:7102 alone (lead's replicas are no static target), labeled formation hello", job.StaticConfigs)
	}
	var got []dnsTarget
	for _, d := range job.DNSSDConfigs {
		got = append(got, dnsTarget(d))
	}
	if want := []dnsTarget{{Names: []string{"lead"}, Type: "A", Port: 7101}}; !cmp.Equal(got, want) {
		t.Errorf("dns_sd_configs %+v, want %+v", got, want)
	}
	if len(job.RelabelConfigs) != 1 || job.RelabelConfigs[0].TargetLabel != "formation" || job.RelabelConfigs[0].Replacement != "hello" {
		t.Errorf("relabel_configs %+v; want every target labeled formation hello", job.RelabelConfigs)
	}
	if h := headerOf(text); !strings.Contains(h, "The replicas of lead are found by a DNS lookup") {
		t.Errorf("the header does not say how lead's replicas are scraped:\n%s", h)
	}

	// Every member as replicas: no static target at all.
	f, text = exportScrape(t, exportReplicasRoster(t, true))
	job = f.ScrapeConfigs[0]
	got = nil
	for _, d := range job.DNSSDConfigs {
		got = append(got, dnsTarget(d))
	}
	if want := []dnsTarget{{Names: []string{"lead"}, Type: "A", Port: 7101}, {Names: []string{"worker"}, Type: "A", Port: 7102}}; len(job.StaticConfigs) != 0 || !cmp.Equal(got, want) {
		t.Errorf("both members as replicas: static %+v, dns_sd_configs %+v; want no static target and %+v:\n%s", job.StaticConfigs, got, want, text)
	}

	// The compose file's Prometheus reads that file: its header says each replica is scraped.
	env := envOf(map[string]string{"MUR_FORMATION_TOKEN": "fm", "MUR_OPERATOR_TOKEN": "op"})
	var compose, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "compose", "--monitoring", "--roster", path}, env, &compose, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if h := headerOf(compose.String()); !strings.Contains(h, "scrapes each replica of lead on its own") || !strings.Contains(h, "dns_sd_configs") {
		t.Errorf("the compose file's header does not say its Prometheus scrapes each replica:\n%s", h)
	}
	compose.Reset()
	if err := run(context.Background(), []string{"export", "compose", "--roster", path}, env, &compose, &errb); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(compose.String(), "dns_sd_configs") {
		t.Error("the compose file without --monitoring speaks of Prometheus's scrape")
	}

	// Kubernetes: each of lead's pods carries the scrape annotations, so a Prometheus that discovers
	// pods scrapes every replica.
	var k8s bytes.Buffer
	if err := run(context.Background(), []string{"export", "k8s", "--roster", path}, env, &k8s, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	ss := decodeK8s(t, k8s.Bytes()).statefulSets["lead"]
	if ss == nil {
		t.Fatal("no StatefulSet lead")
	}
	if a := ss.Spec.Template.Annotations; *ss.Spec.Replicas != 3 || a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "7101" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("lead's pods (%d) are annotated %v; want each scraped on port 7101 at /metrics", *ss.Spec.Replicas, a)
	}
}
