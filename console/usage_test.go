package console

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// agentCapsule is an agent capsule named name on the script driver, with extra capability lines.
func agentCapsule(name, caps string) string {
	return "name: " + name + "\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ncapabilities: {network: {allow: [localhost]}" + caps + "}\n"
}

// startChain starts lead, which calls worker, which delegates to its sub-capsule sub, traced, and a
// console whose trace UI is traceURL.
func startChain(t *testing.T, traceURL string) (*Console, string, map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{
		"roster.yaml":            "formation: chain\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":       agentCapsule("lead", ""),
		"lead/script.yaml":       "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml":     agentCapsule("worker", ", spawn: {allow: [./sub]}"),
		"worker/script.yaml":     "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: sub, task: 'part of {{.task}}'}}]\n      - say: waiting\n      - say: 'worker got: {{.message}}'\n",
		"worker/sub/murmur.yaml": agentCapsule("sub", ""),
		"worker/sub/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'sub did: {{.task}}'\n",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	records := filepath.Join(root, "records")
	f, err := server.StartFormation(server.FormationConfig{Roster: r, DataDir: filepath.Join(root, ".murmur"), RecordsRoot: records,
		Tokens: server.Tokens{Operator: testOperatorToken, Formation: "formation-token-for-tests"}, MaxBody: server.DefaultMaxBody,
		Version: "test", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("formation shutdown: %v", err)
		}
		tp.Shutdown(ctx)
	})
	urls := map[string]string{}
	for _, m := range f.Members {
		urls[m.Name] = m.URL
	}
	r2, err := r.WithURLs(urls)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Roster: r2, Token: testOperatorToken, RecordsRoot: records, Poll: testPoll, TraceURL: traceURL})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console serve: %v", err)
		}
	})
	return c, "http://" + ln.Addr().String(), urls
}

var treeNode = regexp.MustCompile(`<li class="tree-node[^"]*" data-task-id="([^"]+)" data-depth="(\d+)"`)

// A task's page shows what it used, its own tokens and those it caused, and links to its trace in the
// trace UI; the tree of tasks the request caused (lead's, worker's, worker's sub-session's) is on the
// page of each of them, and a task another caused names the request it is part of with what the whole
// request used. The formation's task list shows each request's tokens.
func TestUsageTraceAndTreeOnTheConsole(t *testing.T) {
	const traceUI = "http://localhost:16686/trace/{trace_id}"
	c, base, urls := startChain(t, traceUI)
	lead := a2a.NewClient(urls["lead"]+"/a2a", testOperatorToken, nil)
	res, err := lead.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hello")}}})
	if err != nil || res.Task == nil || res.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task: %v %+v", err, res)
	}
	task, err := lead.GetTask(context.Background(), &a2a.GetTaskRequest{ID: res.Task.ID})
	if err != nil {
		t.Fatal(err)
	}
	u, traceID := usageOf(task), traceIDOf(task)
	if u == nil || traceID == "" || u.Tasks != 2 || u.Caused.Calls == 0 {
		t.Fatalf("lead's task reports usage %+v and trace %q; want both, with 2 tasks caused", u, traceID)
	}

	b := newBrowser(t, base)
	b.login(c)
	page := "/members/lead/tasks/" + string(task.ID)
	var body string
	var nodes [][]string
	waitFor(t, "the request's tree on lead's task page", func() bool {
		var code int
		code, body = b.get(page)
		nodes = treeNode.FindAllStringSubmatch(body, -1)
		return code == http.StatusOK && len(nodes) == 3
	})
	body = html.UnescapeString(body)
	for _, want := range []string{
		fmt.Sprintf(`data-total-input="%d" data-total-output="%d" data-caused-tasks="2"`, u.Total.Input, u.Total.Output),
		"own: " + u.Self.String(),
		"caused, by 2 task(s) and sub-session(s): " + u.Caused.String(),
		"in all: " + u.Total.Short(),
		`<code>` + traceID + `</code>`,
		`href="http://localhost:16686/trace/` + traceID + `" id="trace-link"`,
		"› sub-capsule sub",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("lead's task page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `id="task-request"`) {
		t.Error("lead's task, the request itself, names a request it is part of")
	}
	if nodes[0][1] != string(task.ID) || nodes[0][2] != "0" || nodes[1][2] != "1" || nodes[2][2] != "2" {
		t.Fatalf("the tree %v: want lead's task at its root, worker's below it, the sub-session's below that", nodes)
	}
	workerTask, subTask := nodes[1][1], nodes[2][1]
	if !strings.Contains(body, `href="/members/worker/tasks/`+workerTask+`"`) {
		t.Errorf("the tree does not link worker's task %s", workerTask)
	}

	// Worker's task: what it used itself and by its sub-session, and the request it is part of.
	wt, err := a2a.NewClient(urls["worker"]+"/a2a", testOperatorToken, nil).GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(workerTask)})
	if err != nil {
		t.Fatal(err)
	}
	wu := usageOf(wt)
	if wu == nil || wu.Tasks != 1 || wu.Total != u.Caused {
		t.Fatalf("worker's usage %+v, want 1 task caused and lead's caused tokens %+v in all", wu, u.Caused)
	}
	_, body = b.get("/members/worker/tasks/" + workerTask)
	body = html.UnescapeString(body)
	for _, want := range []string{
		fmt.Sprintf(`data-total-input="%d" data-total-output="%d" data-caused-tasks="1"`, wu.Total.Input, wu.Total.Output),
		`id="task-request">part of the request <a href="` + page + `"`,
		`<strong id="request-total">` + u.Total.Short() + `</strong>`,
		`href="http://localhost:16686/trace/` + traceID + `" id="trace-link"`,
		`data-task-id="` + subTask + `" data-depth="2"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("worker's task page lacks %q:\n%s", want, body)
		}
	}

	// The formation page's task list shows the request's tokens in all.
	waitFor(t, "lead's task with its tokens in the task list", func() bool {
		_, body := b.get("/")
		return strings.Contains(html.UnescapeString(body), u.Total.Short()+`<div class="why">with 2 task(s) it caused</div>`)
	})
}

// A trace UI template that would make no link is refused when the console starts.
func TestTraceURLIsChecked(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "lead"), 0o755)
	os.WriteFile(filepath.Join(dir, "lead", "murmur.yaml"), []byte(agentCapsule("lead", "")), 0o644)
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"localhost:16686/trace/{trace_id}", "http://localhost:16686/search", "javascript:alert({trace_id})"} {
		if _, err := New(Config{Roster: r, Token: "t", TraceURL: bad}); err == nil || !strings.Contains(err.Error(), "{trace_id}") {
			t.Errorf("New with trace URL %q: %v, want a refusal naming {trace_id}", bad, err)
		}
	}
	c, err := New(Config{Roster: r, Token: "t", TraceURL: "https://grafana.example/explore?trace={trace_id}"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.traceLink("4bf92f3577b34da6a3ce929d0e0e4736"); got != "https://grafana.example/explore?trace=4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traceLink = %q", got)
	}
}
