package member

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// clock is a test clock that moves only when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type sessionOpts struct {
	clock   *clock
	getenv  func(string) string
	confine bool // commands run through this test binary as the confining helper
	isolate func() sandbox.Isolation
	roster  string      // a roster.yaml for the session, whose member is "m"; "" for none
	peers   calls.Peers // how peers' doors are reached, with roster
	token   string      // the formation token
	// wasmCache is the session's compiled-module cache ("" for the default under its data directory).
	wasmCache string
	tp        trace.TracerProvider // what the session traces with; nil: the global (no-op) one
	// wrap, when set, is the store the session is given around the one the test opened.
	wrap func(store.Tasks) store.Tasks
}

// startSession starts a session on a capsule made of files, with a fresh store, records, workdir and
// runtime directory under the root it returns; it is closed at cleanup.
func startSession(t testing.TB, files map[string]string, o sessionOpts) (*testSession, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := capsule.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := store.Open(filepath.Join(root, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// root is laid out as a formation's data directory is: the store and the workdir inside it.
	cfg := Config{Member: "m", Formation: "f", Capsule: c, Store: tasks, Metrics: m, DataDir: root,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: filepath.Join(root, "work"),
		RuntimeRoot: filepath.Join(root, "run"), Getenv: o.getenv, FormationToken: o.token}
	cfg.WasmCacheDir, cfg.TracerProvider = o.wasmCache, o.tp
	if o.wrap != nil {
		cfg.Store = o.wrap(tasks)
	}
	if o.clock != nil {
		cfg.Now = o.clock.Now
	}
	if o.confine {
		cfg.ConfineHelper = os.Args[0]
	}
	cfg.Isolate = o.isolate
	if o.roster != "" {
		if cfg.Roster, err = roster.Parse(filepath.Join(root, "roster.yaml"), []byte(o.roster)); err != nil {
			t.Fatal(err)
		}
		cfg.Peers = o.peers
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) // releases the gated scripts of some tests
		s.Close(context.Background())
		tasks.Close()
	})
	return &testSession{Session: s, dir: dir}, root
}

func TestStagingWritesExactlyTheGrantedManifests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		capsule string
		want    []string
	}{
		{"script capsule", "name: s\nscript: {command: [cat]}\n", []string{}},
		{"agent capsule", agentCapsule(""), []string{"session-status"}},
		{"agent with driver control", agentCapsule("control: {agent_settings: [inference.driver]}\n"), []string{"session-status", "switch-driver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := startSession(t, map[string]string{"murmur.yaml": tc.capsule, "script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: '{{join .tools \",\"}}'\n"}, sessionOpts{})
			runDir := filepath.Join(root, "run", s.ID())
			entries, _ := os.ReadDir(filepath.Join(runDir, "tools"))
			got := []string{}
			for _, e := range entries {
				got = append(got, e.Name())
				var m map[string]any
				b, err := os.ReadFile(filepath.Join(runDir, "tools", e.Name(), "murmur.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if err := yaml.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				for k, v := range map[string]any{"name": e.Name(), "version": "0.0.0", "runtime": "tool", "implementation": "native"} {
					if m[k] != v {
						t.Errorf("%s manifest %s = %v, want %v", e.Name(), k, m[k], v)
					}
				}
				if m["description"] == "" || m["input_schema"] == nil {
					t.Errorf("%s manifest lacks description or input_schema: %v", e.Name(), m)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("staged manifests (-want +got):\n%s", diff)
			}
			var declared []string
			for _, r := range readTrace(t, s.Session) {
				if r["type"] == "session_start" {
					for _, n := range r["tools_declared"].([]any) {
						declared = append(declared, n.(string))
					}
				}
			}
			if diff := cmp.Diff(tc.want, append([]string{}, declared...)); diff != "" {
				t.Errorf("tools_declared (-want +got):\n%s", diff)
			}
			if s.Capsule().IsAgent() {
				if got := answer(s.run(t, "x", Origin{})); got != strings.Join(tc.want, ",") {
					t.Errorf("the model was sent the tools %q, want %q", got, strings.Join(tc.want, ","))
				}
			}
		})
	}
}

func TestSessionStatusThroughTheLoop(t *testing.T) {
	clk := &clock{now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)}
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("  max_turns: 9\n  max_session_tokens: 100000\nlifecycle:\n  keep_working: {limit: 4}\n  deadline_notice_secs: 0\ndeadline: 2h\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: session-status}]\n      - say: '{{(index .results 0).output}}'\n",
	}, sessionOpts{clock: clk})
	clk.advance(90 * time.Second)
	task := s.run(t, "how am I doing", Origin{})
	var got map[string]any
	if err := json.Unmarshal([]byte(answer(task)), &got); err != nil {
		t.Fatalf("answer %q: %v", answer(task), err)
	}
	for path, want := range map[string]any{
		"time.elapsed_secs":       90.0,
		"time.task_elapsed_secs":  0.0,
		"time.deadline.at":        "2026-10-20T14:00:00Z",
		"time.deadline.left_secs": 7110.0,
		"turns.used":              1.0,
		"turns.cap":               9.0,
		"keep_working.used":       0.0,
		"keep_working.left":       4.0,
		"done_check":              "none",
		"context.window_tokens":   "none",
		"context.measured_by":     "actual", // the script driver reports its own deterministic count
		"tokens.cached":           "unknown",
		"tokens.cache_write":      "unknown",
		"tokens.unreported_calls": 0.0,
		"spend.ceiling":           100000.0,
		"spend.machine":           "none",
	} {
		if v := dig(got, path); v != want {
			t.Errorf("%s = %#v, want %#v", path, v, want)
		}
	}
	in, out, spend := dig(got, "tokens.input").(float64), dig(got, "tokens.output").(float64), dig(got, "spend.tokens").(float64)
	if in <= 0 || out <= 0 || spend != in+out {
		t.Errorf("tokens input %v output %v spend %v: the script driver's estimates must count", in, out, spend)
	}
	n := 0
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "session_status" {
			n++
			if diff := cmp.Diff(got, r["status"]); diff != "" {
				t.Errorf("the session_status record does not carry the object returned (-returned +record):\n%s", diff)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d session_status records, want 1", n)
	}
}

func dig(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

func TestDeadlineNoticeOnceInsideTheMargin(t *testing.T) {
	clk := &clock{now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)}
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("deadline: 1h\nlifecycle: {deadline_notice_secs: 300}\n"),
		// three tool turns: a refused call, then two session-status calls
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: no-such-tool}]\n      - call: [{tool: session-status}]\n      - call: [{tool: session-status}]\n      - say: '{{.transcript}}'\n",
	}, sessionOpts{clock: clk})
	clk.advance(56*time.Minute + 30*time.Second) // 210 s left: inside the margin
	transcript := answer(s.run(t, "go", Origin{}))
	line := "Session deadline: the runtime ends this session at 2026-10-20T13:00:00Z, in 210 seconds."
	if n := strings.Count(transcript, line); n != 1 {
		t.Fatalf("the notice appears %d times, want once:\n%s", n, transcript)
	}
	// It rides the first tool result that ran (session-status), not the refused call before it.
	i := strings.Index(transcript, "</untrusted-content>\n"+line)
	refused := strings.Index(transcript, "no tool named")
	first := strings.Index(transcript, `"elapsed_secs"`)
	if i < 0 || !(refused < first && first < i) {
		t.Errorf("the notice is not the line after the first session-status result's fence:\n%s", transcript)
	}
	n := 0
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "deadline_notice" {
			n++
			if r["at"] != "2026-10-20T13:00:00Z" || r["left_secs"] != 210.0 {
				t.Errorf("deadline_notice %v", r)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d deadline_notice records, want 1", n)
	}
}

func TestKeepWorkingNudgesThenGivesUp(t *testing.T) {
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("lifecycle:\n  keep_working: {limit: 2}\n"),
		"script.yaml": "rules:\n  - match: 'finish'\n    turns:\n      - say: ''\n      - say: 'done after {{.turn}} turns'\n  - match: ''\n    turns:\n      - say: ''\n      - say: ''\n      - say: ''\n      - say: 'never'\n",
	}, sessionOpts{})
	if got := answer(s.run(t, "finish it", Origin{})); got != "done after 2 turns" {
		t.Errorf("after one nudge: %q", got)
	}
	task := s.run(t, "stall", Origin{})
	if task.Status.State != a2a.TaskStateFailed || status(task) != "the model ended its turn without an answer" {
		t.Errorf("after the limit: %s %q", task.Status.State, status(task))
	}
	nudges := 0
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "keep_working" {
			nudges++
		}
	}
	if nudges != 3 {
		t.Errorf("%d keep_working records, want 1 + 2", nudges)
	}
}

func TestDoneCheckReopensTheTask(t *testing.T) {
	s, _ := startSession(t, map[string]string{
		// The check passes once the file "ok" exists; the model creates it... by being asked twice.
		"murmur.yaml": agentCapsule("lifecycle:\n  done_check: {command: [sh, -c, 'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 3 ] || { echo \"check $n failed\"; exit 1; }'], limit: 3}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'first try'\n      - say: 'second try: {{.message}}'\n      - say: 'third try'\n",
	}, sessionOpts{})
	task := s.run(t, "build it", Origin{})
	if task.Status.State != a2a.TaskStateCompleted || answer(task) != "third try" {
		t.Fatalf("task %s %q %q", task.Status.State, answer(task), status(task))
	}
	var reopened []float64
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "task_reopened" {
			reopened = append(reopened, r["used"].(float64))
		}
	}
	if diff := cmp.Diff([]float64{1, 2}, reopened); diff != "" {
		t.Errorf("task_reopened used counts (-want +got):\n%s", diff)
	}
	// A check that never passes ends the task failed once the limit is spent.
	s2, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("lifecycle:\n  done_check: {command: [sh, -c, 'echo still broken; exit 2'], limit: 1}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'an answer'\n",
	}, sessionOpts{})
	task = s2.run(t, "x", Origin{})
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(status(task), "exited with status 2 after 1 reopen(s)") || !strings.Contains(status(task), "still broken") {
		t.Errorf("unpassable check: %s %q", task.Status.State, status(task))
	}
}

func TestSpendCeilingStopsInference(t *testing.T) {
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("  max_session_tokens: 1\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'spent'\n",
	}, sessionOpts{})
	if task := s.run(t, "one", Origin{}); task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the first task: %s", task.Status.State)
	}
	task := s.run(t, "two", Origin{})
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(status(task), "its inference.max_session_tokens ceiling of 1") {
		t.Errorf("past the ceiling: %s %q", task.Status.State, status(task))
	}
}

func TestCompactionKeepsTheTaskAndRecords(t *testing.T) {
	long := strings.Repeat("word ", 200)
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": "name: agent\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml, context_window: 1000, max_output_tokens: 200}\n  compaction: {threshold: 0.5}\n",
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" + strings.Repeat("      - call: [{tool: none, input: {pad: '"+long+"'}}]\n", 4) + "      - say: '{{len .transcript}}|{{.message}}'\n",
	}, sessionOpts{})
	task := s.run(t, "the task text", Origin{})
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("%s %q", task.Status.State, status(task))
	}
	var comps []map[string]any
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "compaction" {
			comps = append(comps, r)
		}
	}
	if len(comps) == 0 {
		t.Fatal("no compaction record, though the conversation passed half of its 800-token budget")
	}
	c := comps[0]
	if c["budget_tokens"] != 800.0 || c["tokens_before_source"] != "actual" || c["tokens_after"].(float64) >= c["tokens_before"].(float64) {
		t.Errorf("compaction record %v", c)
	}
}

func TestSwitchDriverServesTheNextCall(t *testing.T) {
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": "name: agent\ninference:\n  driver: a\n  choices:\n    a: {driver: script, script: a.yaml}\n    b: {driver: script, script: b.yaml}\n    gpt: {driver: script, script: b.yaml, credential: env:NOT_SET_ANYWHERE}\ncontrol: {agent_settings: [inference.driver]}\n",
		"a.yaml":      "rules:\n  - match: ''\n    turns:\n      - call: [{tool: switch-driver, input: {driver: gpt}}]\n      - call: [{tool: switch-driver, input: {driver: b}}]\n      - say: 'a should not answer'\n",
		"b.yaml":      "rules:\n  - match: ''\n    turns:\n      - say: never\n      - say: never\n      - say: 'b answers; it was told: {{(index .results 0).output}}'\n",
	}, sessionOpts{getenv: func(string) string { return "" }})
	task := s.run(t, "switch", Origin{})
	want := "b answers; it was told: switched the driver choice from a to b: the next inference call, and every one after it, is served by b."
	if got := answer(task); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	var types []string
	for _, r := range readTrace(t, s.Session) {
		switch r["type"] {
		case "control_change", "control_refused", "control_applied":
			types = append(types, r["type"].(string))
			if r["type"] != "control_applied" && r["principal"] != "agent" {
				t.Errorf("%v has no principal agent", r)
			}
		}
	}
	if diff := cmp.Diff([]string{"control_refused", "control_change", "control_applied"}, types); diff != "" {
		t.Errorf("control records (-want +got):\n%s", diff)
	}
	if s.Current() != "b" {
		t.Errorf("the next task would use %s", s.Current())
	}
}

func TestSessionEndsAtItsDeadline(t *testing.T) {
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": "name: s\nscript:\n  command: [sh, -c, 'while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done']\ndeadline: 1s\ntask_acceptance: queue\n",
	}, sessionOpts{})
	ctx := context.Background()
	msg := &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("x")}}
	running, _ := s.Send(ctx, fresh(msg), Origin{})
	queued, _ := s.Send(ctx, fresh(msg), Origin{})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	at := s.deadline.UTC().Format(time.RFC3339)
	for _, id := range []a2a.TaskID{running.ID, queued.ID} {
		got, err := s.Wait(wctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := "the session reached its deadline, " + at + ", before the task finished"; got.Status.State != a2a.TaskStateFailed || status(got) != want {
			t.Errorf("task at the deadline: %s %q, want failed %q", got.Status.State, status(got), want)
		}
	}
	late, err := s.Send(ctx, fresh(msg), Origin{})
	if err != nil || late.Status.State != a2a.TaskStateRejected || status(late) != "task rejected: the session ended at its deadline, "+at {
		t.Errorf("a task after the deadline: %+v %v", late.Status, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "session_end" {
			// The task the deadline stopped failed, and it decides the session's exit status.
			if r["reason"] != "deadline" || r["exit_status"] != "failed" {
				t.Errorf("session_end %v", r)
			}
		}
		if r["type"] == "task_end" || r["type"] == "session_end" {
			types = append(types, r["type"].(string))
		}
	}
	if diff := cmp.Diff([]string{"task_end", "task_end", "session_end"}, types); diff != "" {
		t.Errorf("session_end is not once, after the tasks the deadline ended (-want +got):\n%s", diff)
	}
}
