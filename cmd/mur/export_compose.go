package main

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/roster"
)

// composeYAML is the compose file of l; outDir is the directory the file will be in, which its relative
// paths start from.
func composeYAML(l *layout, outDir, image string, monitoring bool) ([]byte, error) {
	header := composeHeader(l, outDir, image, monitoring)
	bind := relSlash(outDir, l.root) + ":" + formationMount + ":ro"
	services := ymap()
	volumes := ymap()
	for _, m := range l.r.Members {
		services.Content = append(services.Content, ynode(m.Name), composeService(l, m, bind, image, monitoring))
		volumes.Content = append(volumes.Content, ynode(m.Name+"-data"), ymap())
	}
	if monitoring {
		services.Content = append(services.Content, monitoringServices()...)
		volumes.Content = append(volumes.Content, ynode("prometheus-data"), ymap(), ynode("grafana-data"), ymap())
	}
	return encodeYAML(header, ymap("services", services, "volumes", volumes))
}

// composeHeader is the compose file's header: what it is, the command that wrote it, the variables it
// reads, how to start it, and what each member's task store needs.
func composeHeader(l *layout, outDir, image string, monitoring bool) []string {
	r := l.r
	cmdline := "mur export compose --roster " + strings.TrimPrefix(relSlash(outDir, r.Path), "./")
	if monitoring {
		cmdline += " --monitoring"
	}
	header := append(generatedBy(fmt.Sprintf("The %s formation in containers: one service per member, each running mur member.", r.Formation),
		cmdline+" --out compose.yaml"),
		"Regenerate it rather than edit it.",
		"",
		"MUR_FORMATION_TOKEN, MUR_OPERATOR_TOKEN  required: set them in the environment or in .env beside this file",
		"MUR_CONTROL_TOKEN                        optional, the same way: opens each member's control surface (POST /control)",
		"MUR_IMAGE                                the mur image (default "+image+")",
	)
	if entry, _ := r.Member(l.entry); entry.ReplicaCount() == 1 {
		header = append(header, fmt.Sprintf("MUR_ENTRY_ADDR                           where %s's door is published (default 127.0.0.1:%d)", l.entry, l.ports[l.entry]))
	}
	header = append(header,
		"",
		"  docker compose up -d                        start the members",
	)
	if monitoring {
		header = append(header, monitoringNote(r)...)
	}
	for _, m := range r.Members {
		header = append(header, composeStoreNote(m, l.ports[m.Name], m.Name == l.entry)...)
	}
	return header
}

// monitoringNote is what the header says of the monitoring profile: how to start it, how its
// Prometheus finds replicas, and where the members' spans go.
func monitoringNote(r *roster.Roster) []string {
	note := []string{
		"  docker compose --profile monitoring up -d   and Prometheus (127.0.0.1:9090), Grafana (127.0.0.1:3000) and",
		"                                              Jaeger (127.0.0.1:16686), whose images need a registry",
	}
	var replicated []string
	for _, m := range r.Members {
		if m.ReplicaCount() > 1 {
			replicated = append(replicated, m.Name)
		}
	}
	if len(replicated) > 0 {
		note = append(note, wrapWords("Prometheus reads prometheus.yml beside this file (mur export prometheus), which scrapes each replica of "+
			strings.Join(replicated, ", ")+" on its own, found by a DNS lookup of the service name (dns_sd_configs).")...)
	}
	return append(append(note, ""), wrapWords("Every member sends its spans to Jaeger over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT="+
		otlpEndpoint+", OTEL_SERVICE_NAME its name; docs/tracing.md). Without the monitoring profile up the members "+
		"run all the same: spans that find no collector cost a warning in the member's log, never its start.")...)
}

// composeService is member m's service: mur member with the formation mounted read-only (bind), a
// named volume for its data, its tokens from the environment, a health check, and the entry member's
// door published on the loopback; with monitoring, its spans exported to the profile's Jaeger.
func composeService(l *layout, m roster.Member, bind, image string, monitoring bool) *yaml.Node {
	port := l.ports[m.Name]
	var ports, deploy *yaml.Node
	switch {
	case m.Name == l.entry && m.ReplicaCount() > 1:
		// Replicas cannot each bind one host port, and a host port range is unreliable with
		// replicas (compose v2 hands every replica the whole range, docker/compose#8530 and #10246):
		// with the host port left out (IP::PORT, as docker run -p takes it; compose v1 also refuses
		// the long syntax's host_ip), Docker gives each replica a free one, on the loopback only.
		ports = yseq(yquoted(fmt.Sprintf("127.0.0.1::%d", port)))
	case m.Name == l.entry:
		ports = yseq(yquoted(fmt.Sprintf("${MUR_ENTRY_ADDR:-127.0.0.1:%d}:%d", port, port)))
	}
	if n := m.ReplicaCount(); n > 1 {
		// Each replica names itself by its container's host name (mur member's default when the
		// roster says replicas:), so no MUR_REPLICA is set; they share the named volume, in which
		// each keeps a directory of its own.
		deploy = ymap("replicas", n)
	}
	env := ymap(
		"MUR_CONTROL_TOKEN", "${MUR_CONTROL_TOKEN:-}",
		"MUR_DOOR_URLS", l.doorURLs,
		"MUR_FORMATION_TOKEN", "${MUR_FORMATION_TOKEN:?set MUR_FORMATION_TOKEN in .env beside the compose file or in the environment}",
		"MUR_LISTEN", fmt.Sprintf("0.0.0.0:%d", port),
		"MUR_OPERATOR_TOKEN", "${MUR_OPERATOR_TOKEN:?set MUR_OPERATOR_TOKEN in .env beside the compose file or in the environment}",
	)
	if name, ok := storePasswordVar(m); ok {
		// A member whose tasks are on PostgreSQL reads its store's password from the variable its
		// store_password names; the compose file passes it through, never holds it.
		env.Content = append(env.Content, ynode(name), ynode("${"+name+":?set "+name+", the password of "+m.Name+"'s task store, in .env beside the compose file or in the environment}"))
	}
	if monitoring {
		// The endpoint is set whether or not the profile is up: the exporter dials only when it sends a
		// batch, and a collector it cannot reach costs a warning (internal/telemetry), so a member needs
		// no Jaeger to start. No depends_on: a service of an inactive profile cannot be depended on.
		env = yappend(env,
			"OTEL_EXPORTER_OTLP_ENDPOINT", otlpEndpoint,
			"OTEL_SERVICE_NAME", m.Name,
		)
	}
	return ymap(
		"image", "${MUR_IMAGE:-"+image+"}",
		"command", yflow("member", "--roster", l.rosterIn, "--name", m.Name),
		"environment", env,
		"ports", ports,
		"deploy", deploy,
		"volumes", yseq(bind, m.Name+"-data:"+dataMount),
		"healthcheck", ymap(
			"test", yflow("CMD", "mur", "health", "--door", fmt.Sprintf("http://127.0.0.1:%d", port)),
			"interval", "5s",
			"timeout", "3s",
			"retries", 3,
			"start_period", "30s",
		),
		"init", true,
		"read_only", true,
		"tmpfs", yflow("/tmp"),
		"cap_drop", yflow("ALL"),
		"security_opt", yflow("no-new-privileges:true"),
		"stop_grace_period", "20s",
		"restart", "unless-stopped",
	)
}

// monitoringServices are the services of the profile monitoring, as pairs of name and service:
// Prometheus scraping every door, Jaeger taking the members' spans, and Grafana showing both.
func monitoringServices() []*yaml.Node {
	return []*yaml.Node{
		ynode("prometheus"), ymap(
			"image", "${PROMETHEUS_IMAGE:-"+prometheusImage+"}",
			"profiles", yflow("monitoring"),
			"command", yflow("--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"),
			"ports", yseq(yquoted("${PROMETHEUS_ADDR:-127.0.0.1:9090}:9090")),
			"volumes", yseq("./prometheus.yml:/etc/prometheus/prometheus.yml:ro", "prometheus-data:/prometheus"),
			"restart", "unless-stopped",
		),
		ynode("grafana"), ymap(
			"image", "${GRAFANA_IMAGE:-"+grafanaImage+"}",
			"profiles", yflow("monitoring"),
			"environment", ymap(
				"GF_AUTH_ANONYMOUS_ENABLED", yquoted("true"),
				"GF_AUTH_ANONYMOUS_ORG_ROLE", "Viewer",
			),
			"ports", yseq(yquoted("${GRAFANA_ADDR:-127.0.0.1:3000}:3000")),
			"volumes", yseq("./grafana/provisioning:/etc/grafana/provisioning:ro", "./grafana/dashboards:/var/lib/grafana/dashboards:ro", "grafana-data:/var/lib/grafana"),
			"depends_on", yflow("prometheus", "jaeger"),
			"restart", "unless-stopped",
		),
		// Jaeger v2's image runs its all-in-one configuration (spans in memory) with its OTLP receivers on
		// every address (JAEGER_LISTEN_HOST=0.0.0.0): the members reach them in the compose network,
		// the host reaches only the UI.
		ynode("jaeger"), ymap(
			"image", "${JAEGER_IMAGE:-"+jaegerImage+"}",
			"profiles", yflow("monitoring"),
			"expose", yflow(yquoted("4317"), yquoted("4318")),
			"ports", yseq(yquoted("${JAEGER_ADDR:-127.0.0.1:16686}:16686")),
			"restart", "unless-stopped",
		),
	}
}

// composeStoreNote is what the compose file's header says of member m's task store on PostgreSQL: the
// database it expects, and for replicas how they are reached; nothing for a member on SQLite.
func composeStoreNote(m roster.Member, port int, entry bool) []string {
	if m.Store == "" {
		return nil
	}
	n := m.ReplicaCount()
	if n == 1 {
		return append([]string{""}, wrapWords(fmt.Sprintf("%s's tasks are in %s, which this file does not start.", m.Name, storeDatabase(m.Store)))...)
	}
	text := fmt.Sprintf("%s runs as %d replicas (deploy.replicas) that share its tasks through %s, which this file does not start. "+
		"Each replica names itself by its container's host name. In the compose network, the service name reaches them "+
		"(http://%s:%d: Docker's DNS answers with every replica's address). From outside, put a load balancer in that "+
		"network in front of them", m.Name, n, storeDatabase(m.Store), m.Name, port)
	if !entry {
		return append([]string{""}, wrapWords(text+".")...)
	}
	return append(append([]string{""}, wrapWords(text+", or reach one replica on the loopback port Docker gave it:")...),
		fmt.Sprintf("  docker compose port --index 1 %s %d    (--index 1 to %d)", m.Name, port, n))
}
