package main

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/member/stage"
	"github.com/murmur-run/murmur/roster"
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
	jaegerImage     = "jaegertracing/jaeger:2.15.0"
)

// otlpEndpoint is where the members of a compose file with --monitoring send their spans: the
// monitoring profile's Jaeger, OTLP over HTTP (internal/telemetry's default protocol).
const otlpEndpoint = "http://jaeger:4318"

const exportUsage = `Usage:
  mur export compose --roster FILE [--out FILE] [--image IMAGE] [--monitoring]
  mur export k8s --roster FILE [--out FILE] [--image IMAGE] [--secret=false]
  mur export prometheus --roster FILE [--out FILE]

compose     a compose file: one service per member running mur member (deploy.replicas for a member with
            replicas:), a named volume each for its data, the tokens from the environment or .env, a health
            check by mur health, the entry member's door published on 127.0.0.1; --monitoring adds
            Prometheus, Grafana and Jaeger in the profile monitoring (they read prometheus.yml and grafana/
            beside the compose file) and has every member send its spans to Jaeger
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
		monitoring = fs.Bool("monitoring", false, "add Prometheus, Grafana and Jaeger in the profile monitoring, and send the members' spans to Jaeger")
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
