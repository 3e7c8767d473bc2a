package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
)

const helloDir = "../../deploy/examples/hello"

// copyHello copies the hello example (its checked-in files only) to dir/examples/hello.
func copyHello(t *testing.T, dir string) string {
	t.Helper()
	for _, rel := range []string{"roster.yaml", "lead/murmur.yaml", "lead/script.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		src := filepath.Join(helloDir, rel)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(src)
		dst := filepath.Join(dir, "examples", "hello", rel)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "examples", "hello", "roster.yaml")
}

// TestDeployFilesAreUpToDate regenerates deploy/compose.yaml, deploy/prometheus.yml and
// deploy/k8s/hello.yaml with mur export, from a copy of the hello example laid out as deploy/ is, and
// compares them byte for byte.
func TestDeployFilesAreUpToDate(t *testing.T) {
	deployDir, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyHello(t, dir)
	t.Chdir(dir)
	for _, tc := range []struct {
		file string
		args []string
	}{
		{"compose.yaml", []string{"export", "compose", "--roster", "examples/hello/roster.yaml", "--monitoring", "--out", "compose.yaml"}},
		{"prometheus.yml", []string{"export", "prometheus", "--roster", "examples/hello/roster.yaml", "--out", "prometheus.yml"}},
		{"k8s/hello.yaml", []string{"export", "k8s", "--roster", "examples/hello/roster.yaml", "--secret=false", "--out", "k8s/hello.yaml"}},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), tc.args, noEnv, &out, &errb); err != nil {
			t.Fatalf("mur %s: %v\n%s", strings.Join(tc.args, " "), err, errb.String())
		}
		if errb.Len() > 0 {
			t.Errorf("mur %s printed warnings:\n%s", strings.Join(tc.args, " "), errb.String())
		}
		got, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(deployDir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
			t.Errorf("deploy/%s is not what mur export writes now; in deploy/, run\n  go run ../cmd/mur %s\n(-checked in +generated):\n%s",
				tc.file, strings.Join(tc.args, " "), diff)
		}
	}
}

// TestExportAnyRoster exports a roster whose capsules are outside its directory, with a port-0 member
// and no entry, and whose capsule does not list its peer's service name.
func TestExportAnyRoster(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	write("team/roster.yaml", "formation: Big Team\nmembers:\n  - {name: planner, capsule: ../capsules/planner, listen: '127.0.0.1:0'}\n  - {name: coder, capsule: ../capsules/coder, listen: '127.0.0.1:8000'}\nreach:\n  - {from: planner, to: ['*']}\n")
	write("capsules/planner/murmur.yaml", "name: planner\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\ncapabilities:\n  network: {allow: [localhost]}\n")
	write("capsules/planner/.murmur/formation.token", "secret\n")
	write("capsules/coder/murmur.yaml", "name: coder\nscript: {command: [cat]}\n")
	out := filepath.Join(root, "out", "compose.yaml")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"export", "compose", "--roster", filepath.Join(root, "team/roster.yaml"), "--out", out, "--image", "registry.example/mur:1"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if want := "W-RUN-008: member planner: may call coder at http://coder:8000, but capabilities.network.allow in " +
		filepath.Join(root, "capsules/planner/murmur.yaml") + " does not list coder, so every call to it will fail; add coder to capabilities.network.allow (in a container formation, coder is the service name of member coder)\n"; stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}
	b, _ := os.ReadFile(out)
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Services["planner"]
	if p.Image != "${MUR_IMAGE:-registry.example/mur:1}" || !cmp.Equal(p.Command, []string{"member", "--roster", "/formation/team/roster.yaml", "--name", "planner"}) ||
		p.Volumes[0] != "..:/formation:ro" || p.Environment["MUR_DOOR_URLS"] != "planner=http://planner:7101,coder=http://coder:8000" {
		t.Errorf("planner: %+v", p)
	}
	if !cmp.Equal(p.Ports, []string{"${MUR_ENTRY_ADDR:-127.0.0.1:7101}:7101"}) || len(c.Services["coder"].Ports) != 0 {
		t.Errorf("ports: planner %q, coder %q; want only the first member (no entry:) published", p.Ports, c.Services["coder"].Ports)
	}
	if _, ok := c.Services["prometheus"]; ok {
		t.Error("a prometheus service without --monitoring")
	}

	// The Kubernetes manifests carry the capsules, and nothing of a data directory.
	stdout.Reset()
	stderr.Reset()
	if err := run(context.Background(), []string{"export", "k8s", "--roster", filepath.Join(root, "team/roster.yaml")}, noEnv, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	objs := decodeK8s(t, stdout.Bytes())
	cm := objs.configMaps["big-team-formation"]
	if cm == nil {
		t.Fatalf("no ConfigMap big-team-formation: %v", objs.configMaps)
	}
	if _, ok := cm.Data["capsules_planner_.murmur_formation.token"]; ok || len(cm.Data) != 3 {
		t.Errorf("ConfigMap keys: %v", keys(cm.Data))
	}
	if tok := objs.secrets["big-team-tokens"].StringData; !regexp.MustCompile(`^mur_[0-9a-f]{64}$`).MatchString(tok["formation-token"]) || tok["formation-token"] == tok["operator-token"] {
		t.Errorf("generated tokens %v", tok)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDoorURLs(t *testing.T) {
	for _, tc := range []struct{ value, err string }{
		{"lead=http://lead:7101, worker=http://worker:7102/", ""},
		{"", ""},
		{"lead", "write NAME=URL pairs"},
		{"lead=ftp://lead", `--door-urls: url "ftp://lead" of member lead is not an http:// or https:// URL with a host`},
		{"lead=http://u@lead", `--door-urls: url "http://u@lead" of member lead has a user, query or fragment`},
		{"lead=http://a:1,lead=http://b:1", "names lead twice"},
		{"boss=http://boss:1", "--door-urls: boss is no member of "},
		{"lead=http://127.0.0.1:7102", "--door-urls: members lead and worker would both be reached at http://127.0.0.1:7102"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"check", "--roster", filepath.Join(helloDir, "roster.yaml"), "--door-urls", tc.value}, noEnv, &out, &errb)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("--door-urls %q: %v", tc.value, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("--door-urls %q: %v, want %q", tc.value, err, tc.err)
		case tc.err == "" && !strings.Contains(out.String(), "0 error(s), 0 warning(s)"):
			t.Errorf("--door-urls %q: %s", tc.value, out.String())
		}
	}
	// MUR_DOOR_URLS is what a container sets; a capsule that lists only localhost gets W-RUN-008 there.
	root := t.TempDir()
	copyHello(t, root)
	lead := filepath.Join(root, "examples/hello/lead/murmur.yaml")
	b, _ := os.ReadFile(lead)
	os.WriteFile(lead, bytes.Replace(b, []byte("[localhost, worker]"), []byte("[localhost]"), 1), 0o644)
	var out bytes.Buffer
	env := envOf(map[string]string{"MUR_DOOR_URLS": "lead=http://lead:7101,worker=http://worker:7102"})
	run(context.Background(), []string{"check", "--roster", filepath.Join(root, "examples/hello/roster.yaml")}, env, &out, io.Discard)
	if want := "W-RUN-008: member lead: may call worker at http://worker:7102, but capabilities.network.allow in " + lead +
		" does not list worker"; !strings.Contains(out.String(), want) {
		t.Errorf("check with MUR_DOOR_URLS:\n%s\nwant %q", out.String(), want)
	}
	out.Reset()
	run(context.Background(), []string{"check", "--roster", filepath.Join(root, "examples/hello/roster.yaml")}, noEnv, &out, io.Discard)
	if !strings.Contains(out.String(), "0 warning(s)") {
		t.Errorf("check on loopback: %s", out.String())
	}
	os.WriteFile(lead, bytes.Replace(b, []byte("[localhost, worker]"), []byte("[worker]"), 1), 0o644)
	out.Reset()
	run(context.Background(), []string{"check", "--roster", filepath.Join(root, "examples/hello/roster.yaml")}, noEnv, &out, io.Discard)
	if want := "add localhost to capabilities.network.allow. In a container formation (mur export) members reach each other by service name instead: list worker there too"; !strings.Contains(out.String(), want) {
		t.Errorf("check on loopback without localhost:\n%s\nwant %q", out.String(), want)
	}
}

func TestHealth(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: store closed\n"))
			return
		}
		w.Write([]byte("ready\n"))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, tc := range []struct {
		args   []string
		env    map[string]string
		ready  bool
		code   int
		output string
	}{
		{[]string{"health", "--door", srv.URL}, nil, true, 0, "ready"},
		{[]string{"health"}, map[string]string{"MUR_LISTEN": "0.0.0.0:" + port}, true, 0, "ready"},
		{[]string{"health", "--door", srv.URL + "/"}, nil, false, 1, "503 Service Unavailable: not ready: store closed"},
		{[]string{"health", "--door", "http://127.0.0.1:1"}, nil, true, 1, "not ready:"},
		{[]string{"health"}, nil, true, 2, "give --door URL, or set MUR_LISTEN"},
	} {
		ready = tc.ready
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, envOf(tc.env), &out, &errb)
		code := exitCodeFor(err, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.output) {
			t.Errorf("mur %v (env %v): exit %d, output %q; want exit %d and %q", tc.args, tc.env, code, out.String()+errb.String(), tc.code, tc.output)
		}
	}
}

// TestDockerfilesAgree keeps the registry-free Dockerfile and deploy/Dockerfile.source building the same
// image: they differ only in where the three files come from.
func TestDockerfilesAgree(t *testing.T) {
	const marker = "# --- the same in Dockerfile and deploy/Dockerfile.source from here on ---"
	tail := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(string(b), marker)
		if !ok {
			t.Fatalf("%s has no line %q", path, marker)
		}
		return after
	}
	if diff := cmp.Diff(tail("../../Dockerfile"), tail("../../deploy/Dockerfile.source")); diff != "" {
		t.Errorf("Dockerfile and deploy/Dockerfile.source differ after the marker (-Dockerfile +Dockerfile.source):\n%s", diff)
	}
}

// TestExportedControlTokenOpensTheControlSurface: the k8s export makes a control token (none given) and
// hands it to each member as MUR_CONTROL_TOKEN from its Secret; a member started with that environment
// opens POST /control to it, and to no other token.
func TestExportedControlTokenOpensTheControlSurface(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "k8s", "--roster", filepath.Join(helloDir, "roster.yaml")}, noEnv, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	objs := decodeK8s(t, out.Bytes())
	secret := objs.secrets["hello-tokens"]
	env := []string{}
	for _, e := range objs.statefulSets["lead"].Spec.Template.Spec.Containers[0].Env {
		if e.Name == "MUR_CONTROL_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == secret.Name {
			env = append(env, e.Name+"="+secret.StringData[e.ValueFrom.SecretKeyRef.Key])
		}
	}
	if len(env) != 1 || !regexp.MustCompile(`^MUR_CONTROL_TOKEN=mur_[0-9a-f]{64}$`).MatchString(env[0]) {
		t.Fatalf("the member's MUR_CONTROL_TOKEN from the Secret: %q", env)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(crashCapsule), 0o644)
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: ctl\nmembers:\n  - name: solo\n    capsule: ./solo\n"), 0o644)
	m := startMember(t, rosterPath, filepath.Join(root, "data"), env...)
	for _, tc := range []struct {
		token string
		want  int
	}{
		{strings.TrimPrefix(env[0], "MUR_CONTROL_TOKEN="), http.StatusBadRequest}, // opened: the empty change is refused
		{"op", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodPost, m.url+"/control", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST /control with token %.8s…: %d %s, want %d", tc.token, resp.StatusCode, body, tc.want)
		}
	}
}

// A member whose tasks are on PostgreSQL gets its store's password from the variable its store_password
// names: compose passes the variable through (required), k8s takes it from a Secret of the operator's
// own, and neither file holds it.
func TestExportPassesTheStorePassword(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, helloDir, dir)
	rosterPath := filepath.Join(dir, "roster.yaml")
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.Replace(string(b), "    capsule: ./lead\n",
		"    capsule: ./lead\n    store: postgres://murmur@db:5432/lead\n    store_password: env:LEAD_PG_PASSWORD\n", 1)), 0o644)
	env := envOf(map[string]string{"MUR_FORMATION_TOKEN": "fm", "MUR_OPERATOR_TOKEN": "op", "LEAD_PG_PASSWORD": "hunter2"})
	var compose, k8s, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "compose", "--roster", rosterPath}, env, &compose, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(compose.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Services["lead"].Environment["LEAD_PG_PASSWORD"]; !strings.HasPrefix(got, "${LEAD_PG_PASSWORD:?") {
		t.Errorf("lead's LEAD_PG_PASSWORD in compose: %q, want it passed through from the environment", got)
	}
	if _, ok := doc.Services["worker"].Environment["LEAD_PG_PASSWORD"]; ok {
		t.Error("worker is handed lead's store password")
	}
	if err := run(context.Background(), []string{"export", "k8s", "--roster", rosterPath}, env, &k8s, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, out := range []string{compose.String(), k8s.String()} {
		if strings.Contains(out, "hunter2") {
			t.Error("an export holds the store's password")
		}
	}
	objs := decodeK8s(t, k8s.Bytes())
	found := false
	for _, e := range objs.statefulSets["lead"].Spec.Template.Spec.Containers[0].Env {
		if e.Name == "LEAD_PG_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name == "lead-store" && e.ValueFrom.SecretKeyRef.Key == "password" {
			found = true
		}
	}
	if !found || !strings.Contains(k8s.String(), "kubectl create secret generic lead-store") {
		t.Errorf("lead's StatefulSet does not take LEAD_PG_PASSWORD from the Secret lead-store, or the header does not say to create it")
	}
}

// A member with replicas: N on PostgreSQL is one compose service of N replicas (deploy.replicas) that
// publishes no fixed host port, and one Service in front of a StatefulSet of N pods; the headers name
// the database each member expects, and neither file holds a password or sets MUR_REPLICA (each replica
// names itself by its host name). A member with replicas on SQLite is refused: the containers get no
// MUR_STORE to share.
func TestExportReplicas(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, helloDir, dir)
	rosterPath := filepath.Join(dir, "roster.yaml")
	b, _ := os.ReadFile(rosterPath)
	body := strings.Replace(string(b), "    capsule: ./lead\n",
		"    capsule: ./lead\n    store: postgres://murmur@db:5432/lead\n    store_password: env:LEAD_PG_PASSWORD\n    replicas: 3\n", 1)
	body = strings.Replace(body, "    capsule: ./worker\n", "    capsule: ./worker\n    store: postgres://murmur@db:5432/worker\n    replicas: 2\n", 1)
	os.WriteFile(rosterPath, []byte(body), 0o644)
	env := envOf(map[string]string{"MUR_FORMATION_TOKEN": "fm", "MUR_OPERATOR_TOKEN": "op", "LEAD_PG_PASSWORD": "hunter2"})

	var compose, k8s, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "compose", "--roster", rosterPath}, env, &compose, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(compose.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Deploy      struct {
				Replicas int `yaml:"replicas"`
			} `yaml:"deploy"`
		} `yaml:"services"`
	}
	if err := doc.Decode(&c); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"lead": 3, "worker": 2} {
		s := c.Services[name]
		if s.Deploy.Replicas != want {
			t.Errorf("%s: deploy.replicas %d, want %d", name, s.Deploy.Replicas, want)
		}
		if _, ok := s.Environment["MUR_REPLICA"]; ok {
			t.Errorf("%s: MUR_REPLICA is set; each replica names itself by its container's host name", name)
		}
	}
	// The entry's replicas each get a free port on the loopback: its IP and the container's port, no host port.
	if want := []string{"127.0.0.1::7101"}; !cmp.Equal(c.Services["lead"].Ports, want) {
		t.Errorf("lead (the entry, 3 replicas) publishes %v, want %v", c.Services["lead"].Ports, want)
	}
	if p := c.Services["worker"].Ports; len(p) != 0 {
		t.Errorf("worker publishes %v; only the entry member should", p)
	}
	header := headerOf(compose.String())
	for _, want := range []string{"the PostgreSQL database lead at db:5432", "the PostgreSQL database worker at db:5432",
		"http://lead:7101", "docker compose port --index 1 lead 7101", "load balancer"} {
		if !strings.Contains(header, want) {
			t.Errorf("the compose file's header does not say %q:\n%s", want, header)
		}
	}
	if strings.Contains(header, "MUR_ENTRY_ADDR") {
		t.Errorf("the header offers MUR_ENTRY_ADDR for an entry that publishes no fixed port:\n%s", header)
	}

	if err := run(context.Background(), []string{"export", "k8s", "--roster", rosterPath}, env, &k8s, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	objs := decodeK8s(t, k8s.Bytes())
	for name, want := range map[string]int32{"lead": 3, "worker": 2} {
		ss, svc := objs.statefulSets[name], objs.services[name]
		if ss == nil || svc == nil {
			t.Fatalf("%s: StatefulSet %v, Service %v", name, ss, svc)
		}
		if *ss.Spec.Replicas != want || ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement ||
			!cmp.Equal(ss.Spec.Selector.MatchLabels, svc.Spec.Selector) {
			t.Errorf("StatefulSet %s: replicas %d, pod management %q, selector %v behind the Service's %v; want %d replicas started in parallel behind the Service",
				name, *ss.Spec.Replicas, ss.Spec.PodManagementPolicy, ss.Spec.Selector.MatchLabels, svc.Spec.Selector, want)
		}
		for _, e := range ss.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "MUR_REPLICA" {
				t.Errorf("StatefulSet %s sets MUR_REPLICA; each pod names its replica by its pod name", name)
			}
		}
	}
	if len(objs.services) != 2 || len(objs.statefulSets) != 2 {
		t.Errorf("%d services, %d stateful sets; want one of each per member", len(objs.services), len(objs.statefulSets))
	}
	if !strings.Contains(headerOf(k8s.String()), "the PostgreSQL database lead at db:5432") {
		t.Error("the k8s header does not name lead's database")
	}
	for _, out := range []string{compose.String(), k8s.String()} {
		if strings.Contains(out, "hunter2") {
			t.Error("an export holds the store's password")
		}
	}

	// Replicas on SQLite: refused, for every format that runs the member.
	os.WriteFile(rosterPath, []byte(strings.Replace(body, "    store: postgres://murmur@db:5432/worker\n", "", 1)), 0o644)
	for _, format := range []string{"compose", "k8s"} {
		err := run(context.Background(), []string{"export", format, "--roster", rosterPath}, env, io.Discard, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "E-STORE-003: member worker: replicas: 2") {
			t.Errorf("export %s of worker with replicas: 2 on SQLite: %v; want E-STORE-003", format, err)
		}
	}
}

// headerOf is the comment lines that open a generated file, as one paragraph.
func headerOf(file string) string {
	var lines []string
	for _, line := range strings.Split(file, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		lines = append(lines, strings.TrimPrefix(line, "#"))
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}
