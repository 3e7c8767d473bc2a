package main

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/stage"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// Where things are inside a member's container. The image (Dockerfile) sets MUR_DATA_DIR=/data.
const (
	formationMount = "/formation" // the roster and every capsule, read-only
	dataMount      = "/data"      // the member's volume: task store, workdir, records
	containerUID   = 65532        // the image's user
	defaultPort    = 7101         // a member whose roster listen port is 0
	maxConfigMap   = 900 << 10    // a Kubernetes ConfigMap holds at most 1 MiB
)

// The images of the compose file's monitoring profile; each can be overridden from the environment.
const (
	prometheusImage = "prom/prometheus:v2.55.1"
	grafanaImage    = "grafana/grafana:11.3.0"
)

const exportUsage = `Usage:
  mur export compose --roster FILE [--out FILE] [--image IMAGE] [--monitoring]
  mur export k8s --roster FILE [--out FILE] [--image IMAGE] [--secret=false]
  mur export prometheus --roster FILE [--out FILE]

compose     a compose file: one service per member running mur member (deploy.replicas for a member with
            replicas:), a named volume each for its data, the tokens from the environment or .env, a health
            check by mur health, the entry member's door published on 127.0.0.1; --monitoring adds
            Prometheus and Grafana in the profile monitoring (they read prometheus.yml and grafana/ beside
            the compose file)
k8s         Kubernetes manifests: a Secret with the tokens (MUR_FORMATION_TOKEN, MUR_OPERATOR_TOKEN and
            MUR_CONTROL_TOKEN when set, else fresh ones; --secret=false leaves it to you), a ConfigMap with the roster and
            capsules, and per member a Service and a StatefulSet (of replicas: pods) with a volume claim for its data
prometheus  a Prometheus scrape configuration for every member's door, by service name

In every format a member's door is reached at http://NAME:PORT: its service is named after the member,
and PORT is its listen port in roster.yaml. A capsule that calls a member must list that member's name in
capabilities.network.allow (W-RUN-008, printed here when it does not). Paths in the compose file are
relative to --out's directory (default: the current directory).
`

// layout is a roster as its containers see it: where its files are mounted, each member's port, and the
// URLs members reach each other at.
type layout struct {
	r        *roster.Roster // with the service URLs
	root     string         // absolute directory holding the roster and every capsule
	rosterIn string         // the roster's path inside a container
	ports    map[string]int
	doorURLs string // the MUR_DOOR_URLS value, in roster order
	entry    string
}

func newLayout(r *roster.Roster) (*layout, error) {
	l := &layout{ports: map[string]int{}, entry: r.Entry}
	if l.entry == "" {
		l.entry = r.Members[0].Name
	}
	l.root = r.Dir
	for _, m := range r.Members {
		l.root = commonDir(l.root, m.Capsule)
	}
	rel, err := filepath.Rel(l.root, r.Path)
	if err != nil {
		return nil, err
	}
	l.rosterIn = formationMount + "/" + filepath.ToSlash(rel)
	urls := map[string]string{}
	var pairs []string
	for _, m := range r.Members {
		port := defaultPort
		if _, p, err := net.SplitHostPort(m.Listen); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n != 0 {
				port = n
			}
		}
		l.ports[m.Name] = port
		urls[m.Name] = fmt.Sprintf("http://%s:%d", m.Name, port)
		pairs = append(pairs, m.Name+"="+urls[m.Name])
	}
	l.doorURLs = strings.Join(pairs, ",")
	if l.r, err = r.WithURLs(urls); err != nil {
		return nil, err
	}
	return l, nil
}

// commonDir returns the deepest directory holding both a and b.
func commonDir(a, b string) string {
	for {
		if rel, err := filepath.Rel(a, b); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return a
		}
		parent := filepath.Dir(a)
		if parent == a {
			return a
		}
		a = parent
	}
}

// relSlash is target relative to dir, with forward slashes and a leading ./ when it goes down.
func relSlash(dir, target string) string {
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		return filepath.ToSlash(target)
	}
	rel = filepath.ToSlash(rel)
	if rel == "." || strings.HasPrefix(rel, "../") || rel == ".." {
		return rel
	}
	return "./" + rel
}

func cmdExport(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, exportUsage)
			return nil
		}
		fmt.Fprint(stderr, exportUsage)
		return usagef("name the format: mur export compose, mur export k8s or mur export prometheus")
	}
	format, rest := args[0], args[1:]
	if !slices.Contains([]string{"compose", "k8s", "prometheus"}, format) {
		fmt.Fprint(stderr, exportUsage)
		return usagef("unknown export format %q: use compose, k8s or prometheus", format)
	}
	fs := newFlags("export "+format, "mur export "+format+" --roster FILE [flags]", stderr)
	path := fs.String("roster", "", "the formation's roster.yaml (required)")
	out := fs.String("out", "", "write to this file instead of stdout; compose paths are relative to its directory")
	var image *string
	monitoring := new(bool)
	if format != "prometheus" {
		image = fs.String("image", "mur", "the mur image the members run (compose: the default of ${MUR_IMAGE})")
	}
	if format == "compose" {
		monitoring = fs.Bool("monitoring", false, "add Prometheus and Grafana services in the profile monitoring")
	}
	secret := new(bool)
	if format == "k8s" {
		secret = fs.Bool("secret", true, "write the Secret with the tokens (false: the manifests name it, you create it)")
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if *path == "" {
		return usagef("--roster is required: name the formation's roster.yaml")
	}
	r, err := roster.Load(*path)
	if err != nil {
		return usageError{err}
	}
	l, err := newLayout(r)
	if err != nil {
		return err
	}
	outDir, err := os.Getwd()
	if err != nil {
		return err
	}
	if *out != "" && *out != "-" {
		if outDir, err = filepath.Abs(filepath.Dir(*out)); err != nil {
			return err
		}
	}
	if format != "prometheus" {
		// The containers get no MUR_STORE: a replicated member's store is its roster entry's or none.
		for _, m := range r.Members {
			if f, ok := stage.ReplicasFinding(m, m.Store); ok {
				return usageError{fmt.Errorf("%s: %s (the exported containers are given no MUR_STORE)", r.Path, f)}
			}
		}
	}
	var data []byte
	var used []usedArtifact
	if format != "prometheus" {
		if used, err = usedArtifacts(l, getenv, stderr); err != nil {
			return err
		}
	}
	switch format {
	case "compose":
		globalOnly(used, l, stderr)
		data, err = composeYAML(l, outDir, *image, *monitoring)
	case "k8s":
		outName := "FILE"
		if *out != "" && *out != "-" {
			outName = filepath.Base(*out)
		}
		data, err = k8sYAML(l, used, outDir, outName, *image, *secret, getenv)
	case "prometheus":
		data, err = prometheusYAML(l, outDir)
	}
	if err != nil {
		return err
	}
	// The egress check, as the containers will see it: a finding here is one every container prints too.
	for _, f := range stage.Egress(l.r) {
		fmt.Fprintln(stderr, f)
	}
	if *out == "" || *out == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}

// generatedBy opens a generated file's header: what the file is, then the command that generated it in
// the file's directory.
func generatedBy(what, cmdline string) []string {
	return []string{what, "Generated in this directory by", "  " + cmdline}
}

// composeYAML is the compose file of l; outDir is the directory the file will be in, which its relative
// paths start from.
func composeYAML(l *layout, outDir, image string, monitoring bool) ([]byte, error) {
	r := l.r
	rosterRel := relSlash(outDir, r.Path)
	entryPort := l.ports[l.entry]
	cmdline := "mur export compose --roster " + strings.TrimPrefix(rosterRel, "./")
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
		header = append(header, fmt.Sprintf("MUR_ENTRY_ADDR                           where %s's door is published (default 127.0.0.1:%d)", l.entry, entryPort))
	}
	header = append(header,
		"",
		"  docker compose up -d                        start the members",
	)
	if monitoring {
		header = append(header, "  docker compose --profile monitoring up -d   and Prometheus (127.0.0.1:9090) and Grafana (127.0.0.1:3000),")
		header = append(header, "                                              whose images need a registry")
		var replicated []string
		for _, m := range r.Members {
			if m.ReplicaCount() > 1 {
				replicated = append(replicated, m.Name)
			}
		}
		if len(replicated) > 0 {
			header = append(header, wrapWords("Prometheus reads prometheus.yml beside this file (mur export prometheus), which scrapes each replica of "+
				strings.Join(replicated, ", ")+" on its own, found by a DNS lookup of the service name (dns_sd_configs).")...)
		}
	}
	for _, m := range r.Members {
		header = append(header, composeStoreNote(m, l.ports[m.Name], m.Name == l.entry)...)
	}

	bind := relSlash(outDir, l.root) + ":" + formationMount + ":ro"
	services := ymap()
	volumes := ymap()
	for _, m := range r.Members {
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
		svc := ymap(
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
		services.Content = append(services.Content, ynode(m.Name), svc)
		volumes.Content = append(volumes.Content, ynode(m.Name+"-data"), ymap())
	}
	if monitoring {
		services.Content = append(services.Content,
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
				"depends_on", yflow("prometheus"),
				"restart", "unless-stopped",
			))
		volumes.Content = append(volumes.Content, ynode("prometheus-data"), ymap(), ynode("grafana-data"), ymap())
	}
	return encodeYAML(header, ymap("services", services, "volumes", volumes))
}

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

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// k8sName turns s into a DNS-1123 label.
func k8sName(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if s == "" {
		s = "formation"
	}
	if len(s) > 50 {
		s = strings.TrimRight(s[:50], "-")
	}
	return s
}

// formationFile is one file a member's container needs: the roster or a file of a capsule.
type formationFile struct {
	rel  string // slash-separated, relative to the layout's root
	data []byte
	exec bool
}

// formationFiles reads the roster and every file under each capsule directory, skipping data
// directories (.murmur) and .git, and the files of the artifacts the capsules declare, placed in the
// project store beside the roster (wherever staging found them), in path order.
func formationFiles(l *layout, used []usedArtifact) ([]formationFile, error) {
	seen := map[string]bool{}
	var out []formationFile
	var addAs func(rel, path string) error
	add := func(path string) error {
		rel, err := filepath.Rel(l.root, path)
		if err != nil {
			return err
		}
		return addAs(filepath.ToSlash(rel), path)
	}
	addAs = func(rel, path string) error {
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, formationFile{rel: rel, data: data, exec: fi.Mode().Perm()&0o111 != 0})
		return nil
	}
	if err := add(l.r.Path); err != nil {
		return nil, err
	}
	for _, m := range l.r.Members {
		err := filepath.WalkDir(m.Capsule, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != m.Capsule && (d.Name() == ".murmur" || d.Name() == ".git") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || d.Name() == artifact.FlockFile {
				return nil
			}
			return add(path)
		})
		if err != nil {
			return nil, fmt.Errorf("reading capsule of member %s: %w", m.Name, err)
		}
	}
	for _, u := range used {
		dir := l.inProjectStore(u.a)
		if err := artifactFiles(u.a, func(rel, path string) error { return addAs(dir+"/"+rel, path) }); err != nil {
			return nil, fmt.Errorf("reading artifact %s of member %s: %w", u.a.Ref(), u.member, err)
		}
	}
	slices.SortFunc(out, func(a, b formationFile) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// k8sYAML is the Kubernetes manifests of l: a Secret with the tokens (unless withSecret is false), a
// ConfigMap with the formation's files, and per member a Service and a StatefulSet.
func k8sYAML(l *layout, used []usedArtifact, outDir, outName, image string, withSecret bool, getenv func(string) string) ([]byte, error) {
	r := l.r
	formation := k8sName(r.Formation)
	secretName := formation + "-tokens"
	filesName := formation + "-formation"
	partOf := func(extra ...any) *yaml.Node {
		return ymap(append([]any{"app.kubernetes.io/name", "mur", "app.kubernetes.io/part-of", formation}, extra...)...)
	}

	token := func(env string) string {
		if v := strings.TrimSpace(getenv(env)); v != "" {
			return v
		}
		return server.NewToken()
	}
	cmdline := "mur export k8s --roster " + strings.TrimPrefix(relSlash(outDir, r.Path), "./")
	if image != "mur" {
		cmdline += " --image " + image
	}
	if !withSecret {
		cmdline += " --secret=false"
	}
	if outName != "FILE" {
		cmdline += " --out " + outName
	}
	header := []string{
		fmt.Sprintf("Kubernetes manifests for the %s formation: per member a Service and a StatefulSet (one pod, a", r.Formation),
		"volume claim for /data); a ConfigMap with the roster and the capsules, mounted read-only at " + formationMount + ".",
	}
	if slices.ContainsFunc(r.Members, func(m roster.Member) bool { return m.ReplicaCount() > 1 }) {
		header = wrapWords(fmt.Sprintf("Kubernetes manifests for the %s formation: per member a Service and a StatefulSet (a pod per "+
			"replica, each with a volume claim for /data); a ConfigMap with the roster and the capsules, mounted read-only at %s.", r.Formation, formationMount))
	}
	header = append(header,
		"Members reach each other at http://MEMBER:PORT. Generated in this file's directory by",
		"  "+cmdline)
	var docs []*yaml.Node
	if withSecret {
		header = append(header,
			"with the Secret "+secretName+": MUR_FORMATION_TOKEN, MUR_OPERATOR_TOKEN and MUR_CONTROL_TOKEN (the control",
			"surface's, POST /control) from the environment, or fresh",
			"tokens. Keep this file out of version control. Apply into a namespace of the formation's own:",
			"  kubectl create namespace "+formation,
			"  kubectl -n "+formation+" apply -f "+outName)
		docs = append(docs, ymap(
			"apiVersion", "v1",
			"kind", "Secret",
			"metadata", ymap("name", secretName, "labels", partOf()),
			"type", "Opaque",
			"stringData", ymap(
				"formation-token", token("MUR_FORMATION_TOKEN"),
				"operator-token", token("MUR_OPERATOR_TOKEN"),
				"control-token", token("MUR_CONTROL_TOKEN"),
			),
		))
	} else {
		header = append(header,
			"without the Secret "+secretName+" that holds the tokens: create it, then apply this file, in a",
			"namespace of the formation's own:",
			"  kubectl create namespace "+formation,
			"  kubectl -n "+formation+" create secret generic "+secretName+" \\",
			"    --from-literal=formation-token=$(openssl rand -hex 32) --from-literal=operator-token=$(openssl rand -hex 32) \\",
			"    --from-literal=control-token=$(openssl rand -hex 32)    # optional: opens the control surface, POST /control",
			"  kubectl -n "+formation+" apply -f "+outName)
	}
	header = append(header,
		fmt.Sprintf("  kubectl -n %s port-forward svc/%s %d    # then the curl lines of docs/door.md, on 127.0.0.1", formation, l.entry, l.ports[l.entry]),
		"")

	files, err := formationFiles(l, used)
	if err != nil {
		return nil, err
	}
	data, binary := ymap(), ymap()
	var items []any
	size := 0
	keys := map[string]bool{}
	for _, f := range files {
		size += len(f.data)
		key := strings.ReplaceAll(f.rel, "/", "_")
		for i := 2; keys[key]; i++ {
			key = fmt.Sprintf("%s_%d", strings.ReplaceAll(f.rel, "/", "_"), i)
		}
		keys[key] = true
		if utf8.Valid(f.data) {
			data.Content = append(data.Content, ynode(key), yliteral(string(f.data)))
		} else {
			binary.Content = append(binary.Content, ynode(key), ynode(base64.StdEncoding.EncodeToString(f.data)))
		}
		mode := 0o444
		if f.exec {
			mode = 0o555
		}
		modeNode := ynode(mode)
		modeNode.LineComment = fmt.Sprintf("0%o", mode)
		items = append(items, ymap("key", key, "path", f.rel, "mode", modeNode))
	}
	if size > maxConfigMap {
		return nil, fmt.Errorf("the roster and capsules of %s hold %d KiB, more than a ConfigMap can (1 MiB): build an image FROM mur with them in it instead", r.Path, size>>10)
	}
	cm := ymap(
		"apiVersion", "v1",
		"kind", "ConfigMap",
		"metadata", ymap("name", filesName, "labels", partOf()),
	)
	if len(data.Content) > 0 {
		cm.Content = append(cm.Content, ynode("data"), data)
	}
	if len(binary.Content) > 0 {
		cm.Content = append(cm.Content, ynode("binaryData"), binary)
	}
	docs = append(docs, cm)

	for _, m := range r.Members {
		port := l.ports[m.Name]
		selector := func() *yaml.Node { return partOf("murmur.run/member", m.Name) }
		docs = append(docs, ymap(
			"apiVersion", "v1",
			"kind", "Service",
			"metadata", ymap("name", m.Name, "labels", selector()),
			"spec", ymap(
				"selector", selector(),
				"ports", yseq(ymap("name", "door", "port", port, "targetPort", "door")),
			),
		))
		secretEnv := func(name, key string) *yaml.Node {
			return ymap("name", name, "valueFrom", ymap("secretKeyRef", ymap("name", secretName, "key", key)))
		}
		// The control token is optional: a Secret without it starts the members without a control surface.
		optionalSecretEnv := func(name, key string) *yaml.Node {
			return ymap("name", name, "valueFrom", ymap("secretKeyRef", ymap("name", secretName, "key", key, "optional", true)))
		}
		container := ymap(
			"name", "mur",
			"image", image,
			"imagePullPolicy", "IfNotPresent",
			"args", yflow("member", "--roster", l.rosterIn, "--name", m.Name),
			"env", yseq(
				ymap("name", "MUR_LISTEN", "value", fmt.Sprintf("0.0.0.0:%d", port)),
				ymap("name", "MUR_DOOR_URLS", "value", l.doorURLs),
				ymap("name", "MUR_DATA_DIR", "value", dataMount),
				secretEnv("MUR_FORMATION_TOKEN", "formation-token"),
				secretEnv("MUR_OPERATOR_TOKEN", "operator-token"),
				optionalSecretEnv("MUR_CONTROL_TOKEN", "control-token"),
			),
			"ports", yseq(ymap("name", "door", "containerPort", port)),
			"readinessProbe", ymap("httpGet", ymap("path", "/readyz", "port", "door"), "periodSeconds", 5),
			"livenessProbe", ymap("httpGet", ymap("path", "/healthz", "port", "door"), "periodSeconds", 10, "failureThreshold", 6),
			"securityContext", ymap(
				"allowPrivilegeEscalation", false,
				"readOnlyRootFilesystem", true,
				"capabilities", ymap("drop", yflow("ALL")),
			),
			"volumeMounts", yseq(
				ymap("name", "data", "mountPath", dataMount),
				ymap("name", "formation", "mountPath", formationMount, "readOnly", true),
				ymap("name", "tmp", "mountPath", "/tmp"),
			),
		)
		if name, ok := storePasswordVar(m); ok {
			// The store's password from a Secret of the operator's own, never from this file.
			env := ymapGet(container, "env")
			env.Content = append(env.Content, ymap("name", name, "valueFrom",
				ymap("secretKeyRef", ymap("name", m.Name+"-store", "key", "password"))))
			header = append(header, fmt.Sprintf("%s's task store is on PostgreSQL: create the Secret %s-store with its password under the key password,", m.Name, m.Name),
				fmt.Sprintf("  kubectl create secret generic %s-store --from-literal=password=…", m.Name))
		}
		spec := ymap("serviceName", m.Name, "replicas", m.ReplicaCount())
		switch n := m.ReplicaCount(); {
		case n > 1:
			// A pod's name (and so its replica's, mur member's default) stays with its ordinal across
			// restarts; the replicas need not wait for each other to start.
			spec.Content = append(spec.Content, ynode("podManagementPolicy"), ynode("Parallel"))
			header = append(header, wrapWords(fmt.Sprintf("%s runs as %d pods, %s-0 to %s-%d, behind the one Service %s; each names its replica "+
				"by its pod name, and they share the member's tasks through %s, which these manifests do not create.",
				m.Name, n, m.Name, m.Name, n-1, m.Name, storeDatabase(m.Store)))...)
		case m.Store != "":
			header = append(header, wrapWords(fmt.Sprintf("%s's tasks are in %s, which these manifests do not create.", m.Name, storeDatabase(m.Store)))...)
		}
		docs = append(docs, ymap(
			"apiVersion", "apps/v1",
			"kind", "StatefulSet",
			"metadata", ymap("name", m.Name, "labels", selector()),
			"spec", yappend(spec,
				"selector", ymap("matchLabels", selector()),
				"template", ymap(
					"metadata", ymap(
						"labels", selector(),
						"annotations", ymap(
							"prometheus.io/scrape", yquoted("true"),
							"prometheus.io/port", yquoted(strconv.Itoa(port)),
							"prometheus.io/path", "/metrics",
						),
					),
					"spec", ymap(
						"securityContext", ymap(
							"runAsNonRoot", true,
							"runAsUser", containerUID,
							"runAsGroup", containerUID,
							"fsGroup", containerUID,
						),
						"terminationGracePeriodSeconds", 20,
						"containers", yseq(container),
						"volumes", yseq(
							ymap("name", "formation", "configMap", ymap("name", filesName, "items", yseq(items...))),
							ymap("name", "tmp", "emptyDir", ymap()),
						),
					),
				),
				"volumeClaimTemplates", yseq(ymap(
					"metadata", ymap("name", "data"),
					"spec", ymap(
						"accessModes", yflow("ReadWriteOnce"),
						"resources", ymap("requests", ymap("storage", "1Gi")),
					),
				)),
			),
		))
	}
	return encodeYAML(header, docs...)
}

// storePasswordVar is the environment variable member m's store_password names (env:NAME), which the
// exported formation must hand the member's container; false when it names none.
func storePasswordVar(m roster.Member) (string, bool) {
	name, ok := strings.CutPrefix(m.StorePassword, "env:")
	return name, ok && name != ""
}

// yappend adds the pairs of keys and values to the mapping m, as ymap builds one, and returns m.
func yappend(m *yaml.Node, pairs ...any) *yaml.Node {
	m.Content = append(m.Content, ymap(pairs...).Content...)
	return m
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

// wrapWords breaks text into lines of at most 100 characters for a generated file's header.
func wrapWords(text string) []string {
	var out []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > 100 {
			out = append(out, line)
			line = ""
		}
		line = strings.TrimPrefix(line+" "+w, " ")
	}
	return append(out, line)
}

// storeDatabase names the PostgreSQL database of a member's store URL (roster.yaml's store:) for a
// generated file's comments: the database, its host and its user, never a password (a store: URL holds
// none; CheckStoreURL refuses one).
func storeDatabase(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the PostgreSQL database of its store:"
	}
	q := u.Query()
	host := cmp.Or(u.Host, q.Get("host"))
	user := u.User.Username()
	// libpq's defaults: the database is named after the user.
	db := cmp.Or(strings.TrimPrefix(u.Path, "/"), q.Get("dbname"), user)
	out := "the PostgreSQL database " + cmp.Or(db, "named after the user") + " at " + host
	if user != "" {
		out += " (user " + user + ")"
	}
	return out
}
