package main

import (
	"fmt"
	"strings"
)

// prometheusYAML is a scrape configuration with one target per member's door, by service name.
func prometheusYAML(l *layout, outDir string) ([]byte, error) {
	r := l.r
	rosterRel := strings.TrimPrefix(relSlash(outDir, r.Path), "./")
	header := append(generatedBy(fmt.Sprintf("Prometheus scrape configuration for the %s formation: every member's door, by its service name.", r.Formation),
		"mur export prometheus --roster "+rosterRel+" --out prometheus.yml"),
		"Regenerate it rather than edit it. A Prometheus outside the formation's network scrapes the address",
		"each door is published on instead (docs/containers.md).",
		"",
	)
	// A member of one process is one target, by its service name. A member's replicas sit behind one
	// service name that resolves to each replica's address (compose's DNS, as for deploy.replicas): one
	// target by that name would reach one replica per scrape, a different one each time, so they are
	// found by a DNS lookup of the name (A records) instead, each replica a target of its own; each one's
	// series carry its replica label.
	var targets []any
	var replicated []string
	for _, m := range r.Members {
		if m.ReplicaCount() > 1 {
			replicated = append(replicated, m.Name)
			continue
		}
		targets = append(targets, fmt.Sprintf("%s:%d", m.Name, l.ports[m.Name]))
	}
	job := ymap("job_name", "mur", "metrics_path", "/metrics")
	if len(targets) > 0 {
		job = yappend(job, "static_configs", yseq(ymap(
			"targets", yflow(targets...),
			"labels", ymap("formation", r.Formation),
		)))
	}
	if len(replicated) > 0 {
		header = append(header[:len(header)-1], wrapWords(fmt.Sprintf("The replicas of %s are found by a DNS lookup of the service name "+
			"(dns_sd_configs, A records), each one scraped on its own.", strings.Join(replicated, ", ")))...)
		header = append(header, "")
		var lookups []any
		for _, name := range replicated {
			lookups = append(lookups, ymap("names", yflow(name), "type", "A", "port", l.ports[name]))
		}
		// A DNS lookup's targets take no labels of their own: the job gives every target its formation.
		job = yappend(job, "dns_sd_configs", yseq(lookups...),
			"relabel_configs", yseq(ymap("target_label", "formation", "replacement", r.Formation)))
	}
	doc := ymap(
		"global", ymap("scrape_interval", "15s", "evaluation_interval", "15s"),
		"scrape_configs", yseq(job),
	)
	return encodeYAML(header, doc)
}
