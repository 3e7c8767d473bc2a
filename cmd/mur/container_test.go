package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/a2a"
)

// The container tests run the hello formation as deploy/compose.yaml lays it out, on an image built
// from the Dockerfile (.ci/run builds it and sets MUR_E2E_IMAGE), and scrape it with Debian's
// prometheus. Every request goes to a port published on loopback.

// e2eImageEnv names the image to test; the tests skip, saying so, when it is unset.
const e2eImageEnv = "MUR_E2E_IMAGE"

// dockerCompose returns the command that runs compose here (docker compose, or docker-compose), or
// skips the test in one line when no Docker engine answers.
func dockerCompose(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		t.Skipf("container tests skipped: no Docker engine on this machine (docker version: %v %s)", err, line)
	}
	if os.Getenv(e2eImageEnv) == "" {
		t.Skipf("container tests skipped: %s is not set; build the image (docs/containers.md) and set it to its tag, as .ci/run does", e2eImageEnv)
	}
	for _, argv := range [][]string{{"docker", "compose"}, {"docker-compose"}} {
		if err := exec.CommandContext(ctx, argv[0], append(argv[1:], "version")...).Run(); err == nil {
			return argv
		}
	}
	t.Fatal("a Docker engine answers, but neither docker compose nor docker-compose runs")
	return nil
}

// formation is one compose project of the test.
type formation struct {
	t       *testing.T
	argv    []string // the compose command with -p and -f
	env     []string
	token   string
	doors   map[string]string // member → base URL of its published door
	http    *http.Client
	tmp     string
	project string
}

func (f *formation) compose(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.argv[0], append(slices.Clone(f.argv[1:]), args...)...)
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", strings.Join(f.argv, " "), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (f *formation) must(args ...string) string {
	f.t.Helper()
	out, err := f.compose(args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// container returns the id of a service's container.
func (f *formation) container(service string) string {
	f.t.Helper()
	id := strings.TrimSpace(f.must("ps", "-q", service))
	if id == "" {
		f.t.Fatalf("service %s has no container", service)
	}
	return id
}

// waitHealthy waits until the health check (mur health) of each service passes.
func (f *formation) waitHealthy(services ...string) {
	f.t.Helper()
	for _, s := range services {
		id := f.container(s)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", id).CombinedOutput()
			state := strings.TrimSpace(string(out))
			if err == nil && state == "running healthy" {
				break
			}
			if time.Now().After(deadline) {
				logs, _ := f.compose("logs", "--no-color", s)
				f.t.Fatalf("service %s is %q, not healthy, after 2 minutes (%v)\n%s", s, state, err, logs)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// rpc posts one JSON-RPC request to a member's door, as the curl lines of docs/door.md do, and decodes its result.
func (f *formation) rpc(member, method string, params, result any) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequest(http.MethodPost, f.doors[member]+"/a2a", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *a2a.Error      `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s to %s: HTTP %s, undecodable answer: %v", method, member, resp.Status, err)
	}
	if env.Error != nil {
		return fmt.Errorf("%s to %s: %d %s", method, member, env.Error.Code, env.Error.Message)
	}
	return json.Unmarshal(env.Result, result)
}

// send gives a member a task; with wait it blocks until the task ends (A2A's default).
func (f *formation) send(member, text string, wait bool) *a2a.Task {
	f.t.Helper()
	params := map[string]any{"message": map[string]any{
		"messageId": "msg-" + strconv.FormatInt(time.Now().UnixNano(), 36), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}},
	}}
	if !wait {
		params["configuration"] = map[string]any{"returnImmediately": true}
	}
	var res a2a.SendMessageResponse
	if err := f.rpc(member, "SendMessage", params, &res); err != nil {
		f.t.Fatal(err)
	}
	if res.Task == nil {
		f.t.Fatalf("SendMessage %q to %s answered without a task", text, member)
	}
	return res.Task
}

func (f *formation) get(member string, id a2a.TaskID) *a2a.Task {
	f.t.Helper()
	var task a2a.Task
	if err := f.rpc(member, "GetTask", map[string]any{"id": id, "historyLength": 0}, &task); err != nil {
		f.t.Fatal(err)
	}
	return &task
}

func (f *formation) list(member string) []a2a.Task {
	f.t.Helper()
	var res a2a.ListTasksResponse
	if err := f.rpc(member, "ListTasks", map[string]any{"historyLength": 1, "includeArtifacts": true}, &res); err != nil {
		f.t.Fatal(err)
	}
	return res.Tasks
}

func answer(t *a2a.Task) string {
	if a, ok := t.Artifact("response"); ok {
		return a.Text()
	}
	if t.Status.Message != nil {
		return t.Status.Message.Text()
	}
	return ""
}

// startFormation brings deploy/compose.yaml up under a project of its own, with both doors published on
// loopback ports, and takes it down again (volumes too) when the test ends, whatever happened.
func startFormation(t *testing.T, argv []string, image string) *formation {
	deploy, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	f := &formation{
		t:       t,
		token:   "op-" + hex.EncodeToString(suffix),
		tmp:     t.TempDir(),
		project: "murtest" + hex.EncodeToString(suffix),
		http:    &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Minute},
	}
	if p := os.Getenv("MUR_E2E_PROJECT"); p != "" {
		f.project = p
	}
	addrs := freeAddrs(t, 2) // distinct: two freeAddr calls in a row may be given the same port
	leadAddr, workerAddr := addrs[0], addrs[1]
	f.doors = map[string]string{"lead": "http://" + leadAddr, "worker": "http://" + workerAddr}
	// The test's own additions: worker's door published too (for its tasks and Prometheus), and no
	// restarts, so a killed member stays down until the test starts it.
	override := filepath.Join(f.tmp, "compose.test.yaml")
	os.WriteFile(override, fmt.Appendf(nil, "services:\n  lead:\n    restart: \"no\"\n  worker:\n    restart: \"no\"\n    ports: [\"%s:7102\"]\n", workerAddr), 0o644)
	f.argv = append(slices.Clone(argv), "-p", f.project, "-f", filepath.Join(deploy, "compose.yaml"), "-f", override)
	f.env = append(os.Environ(), "MUR_IMAGE="+image, "MUR_ENTRY_ADDR="+leadAddr,
		"MUR_FORMATION_TOKEN=fm-"+hex.EncodeToString(suffix), "MUR_OPERATOR_TOKEN="+f.token)
	t.Cleanup(func() {
		if t.Failed() {
			if logs, err := f.compose("logs", "--no-color"); err == nil {
				t.Logf("compose logs:\n%s", logs)
			}
		}
		if out, err := f.compose("down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	t.Logf("%s up -d (project %s, lead at %s, worker at %s)", strings.Join(argv, " "), f.project, leadAddr, workerAddr)
	f.must("up", "-d")
	f.waitHealthy("lead", "worker")
	return f
}

func TestContainerFormation(t *testing.T) {
	argv := dockerCompose(t)
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("no prometheus binary (%v): install Debian's prometheus package, as .ci/run does", err)
	}
	f := startFormation(t, argv, os.Getenv(e2eImageEnv))

	// The entry member answers on its published port; worker's answer crosses two containers.
	if task := f.send("lead", "hello", true); task.Status.State != a2a.TaskStateCompleted || !strings.Contains(answer(task), "Hello from lead") {
		t.Fatalf("lead: %s %q", task.Status.State, answer(task))
	}
	asked := f.send("lead", "ask worker: 2 + 3", true)
	if asked.Status.State != a2a.TaskStateCompleted || answer(asked) != "worker says: 5" {
		t.Fatalf("ask worker through lead: %s %q", asked.Status.State, answer(asked))
	}
	direct := f.send("worker", "2 + 40", true)
	if answer(direct) != "42" {
		t.Fatalf("worker: %s %q", direct.Status.State, answer(direct))
	}
	var fromLead *a2a.Task
	for _, task := range f.list("worker") {
		if murmur, _ := task.Metadata["murmur"].(map[string]any); murmur["origin"] == "peer" && answer(&task) == "5" {
			fromLead = &task
		}
	}
	if fromLead == nil {
		t.Fatalf("worker holds no task from lead answered 5: %+v", f.list("worker"))
	}
	t.Logf("lead's question crossed to worker's container as %s", fromLead.ID)

	// Prometheus scrapes both doors with deploy/prometheus.yml and counts the four tasks.
	checkPrometheus(t, prometheus, f, 4)

	// Worker's container is killed while lead's call is out: two reads get no answer, the call ends
	// unreachable, and lead's task ends with that.
	slow := f.send("lead", "ask worker: slow 25", false)
	var held a2a.TaskID
	for deadline := time.Now().Add(30 * time.Second); held == ""; time.Sleep(100 * time.Millisecond) {
		for _, task := range f.list("worker") {
			if task.Status.State == a2a.TaskStateWorking {
				held = task.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("worker never held lead's slow task")
		}
	}
	t.Logf("worker holds %s; killing its container", held)
	f.must("kill", "worker")
	var ended *a2a.Task
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ended = f.get("lead", slow.ID); ended.Status.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lead's task is still %s 30s after worker was killed", ended.Status.State)
		}
	}
	if want := "worker says: worker's door stopped answering"; ended.Status.State != a2a.TaskStateCompleted || answer(ended) != want {
		t.Fatalf("lead's task ended %s %q, want %q", ended.Status.State, answer(ended), want)
	}
	if m := scrape(t, f.doors["lead"]); !strings.Contains(m, `mur_member_calls_total{callee="worker",member="lead",status="unreachable"} 1`) {
		t.Errorf("lead's metrics lack the unreachable call:\n%s", grepLines(m, "mur_member_calls_total"))
	}

	// Worker starts again, and again in a new container: the tasks its door acknowledged are in its
	// volume, the one it was running ended failed by the restart.
	checkWorkerTasks := func(when string) {
		t.Helper()
		for id, want := range map[a2a.TaskID]string{fromLead.ID: "5", direct.ID: "42"} {
			if task := f.get("worker", id); task.Status.State != a2a.TaskStateCompleted || answer(task) != want {
				t.Errorf("%s: worker's task %s is %s %q, want completed %q", when, id, task.Status.State, answer(task), want)
			}
		}
		if task := f.get("worker", held); task.Status.State != a2a.TaskStateFailed || !strings.Contains(answer(task), "member restarted") {
			t.Errorf("%s: worker's interrupted task %s is %s %q", when, held, task.Status.State, answer(task))
		}
	}
	old := f.container("worker")
	f.must("start", "worker")
	f.waitHealthy("worker")
	checkWorkerTasks("after docker compose start worker")
	f.must("up", "-d", "--no-deps", "--force-recreate", "worker")
	f.waitHealthy("worker")
	if f.container("worker") == old {
		t.Error("--force-recreate kept worker's container")
	}
	checkWorkerTasks("in a new container on the same volume")
}

// scrape returns a door's /metrics text.
func scrape(t *testing.T, door string) string {
	t.Helper()
	resp, err := http.Get(door + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(text, substr string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// checkPrometheus runs prometheus with deploy/prometheus.yml, its targets (the doors by service name)
// replaced with the ports they are published on, and checks through its HTTP API that every door is
// scraped, that mur_tasks_total adds up to tasks, and that every PromQL expression of the Grafana
// dashboard evaluates.
func checkPrometheus(t *testing.T, bin string, f *formation, tasks int) {
	t.Helper()
	// The file as it is, for the compose network's Prometheus: promtool comes with Debian's package.
	if out, err := exec.Command(filepath.Join(filepath.Dir(bin), "promtool"), "check", "config", "../../deploy/prometheus.yml").CombinedOutput(); err != nil {
		t.Errorf("promtool check config deploy/prometheus.yml: %v\n%s", err, out)
	}
	b, err := os.ReadFile("../../deploy/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	published := map[string]string{}
	for member, door := range f.doors {
		u, _ := url.Parse(door)
		published[member] = u.Host
	}
	seen := map[string]bool{}
	cfg["global"].(map[string]any)["scrape_interval"] = "1s"
	for _, sc := range cfg["scrape_configs"].([]any) {
		for _, st := range sc.(map[string]any)["static_configs"].([]any) {
			targets := st.(map[string]any)["targets"].([]any)
			for i, target := range targets {
				member, _, _ := strings.Cut(target.(string), ":")
				addr, ok := published[member]
				if !ok {
					t.Fatalf("deploy/prometheus.yml scrapes %s, which is no door of the formation", target)
				}
				targets[i] = addr
				seen[member] = true
			}
		}
	}
	for member := range published {
		if !seen[member] {
			t.Errorf("deploy/prometheus.yml does not scrape %s", member)
		}
	}
	b, _ = yaml.Marshal(cfg)
	config := filepath.Join(f.tmp, "prometheus.yml")
	os.WriteFile(config, b, 0o644)

	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(f.tmp, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	}()
	api := "http://" + addr
	query := func(expr string) ([]map[string]any, error) {
		resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []map[string]any `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, fmt.Errorf("HTTP %s: %v", resp.Status, err)
		}
		if r.Status != "success" {
			return nil, fmt.Errorf("%s: %s", r.Status, r.Error)
		}
		return r.Data.Result, nil
	}
	value := func(expr string) string {
		res, err := query(expr)
		if err != nil || len(res) != 1 {
			return fmt.Sprint(res, err)
		}
		v, _ := res[0]["value"].([]any)
		if len(v) != 2 {
			return fmt.Sprint(res)
		}
		return fmt.Sprint(v[1])
	}
	want := map[string]string{`sum(mur_tasks_total)`: strconv.Itoa(tasks), `count(up{job="mur"} == 1)`: strconv.Itoa(len(f.doors))}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		got := map[string]string{}
		for expr := range want {
			got[expr] = value(expr)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			t.Logf("prometheus: %v", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus still answers %v, want %v", got, want)
		}
	}

	// The dashboard's expressions, with Grafana's variables as a dashboard showing every member sets them.
	b, err = os.ReadFile("../../deploy/grafana/dashboards/mur.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "${member}", ".*", "$member", ".*")
	exprs := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			expr := vars.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: %s uses a variable this test does not know", p.Title, target.Expr)
				continue
			}
			res, err := query(expr)
			switch {
			case err != nil:
				t.Errorf("panel %q: %s: %v", p.Title, expr, err)
			case strings.HasPrefix(expr, "sum by (member, state) (mur_tasks_total") && len(res) == 0:
				t.Errorf("panel %q: %s found no series", p.Title, expr)
			}
			exprs++
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`)
	for _, v := range dash.Templating.List {
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(METRIC, LABEL)", v.Name, v.Definition)
			continue
		}
		res, err := query(fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
		if err != nil || len(res) != len(f.doors) {
			t.Errorf("variable %s: %s finds %v %v, want one value per member", v.Name, v.Definition, res, err)
		}
		exprs++
	}
	t.Logf("prometheus evaluated the dashboard's %d expressions", exprs)
}
