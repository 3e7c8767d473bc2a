package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/store"
)

// The WIT level 2 tests (DESIGN §18) run the level2 example's modules (deploy/examples/level2: the tool
// local/loud that pulls its companion local/shout with manage.pull, the policy hook local/safe-shell that
// asks the model with run_inference) and two of their own (testdata/wit: puller, a tool that pulls what
// its input names; cmdjudge, a command hook that asks the model through its run's endpoint), each through
// a door, an A2A client and a member on the script driver.

// level2 holds the modules, built once per test binary and compiled into a cache the sessions share (a
// compilation takes seconds, and tens of them under -race).
var level2 struct {
	once  sync.Once
	wasm  map[string][]byte // by artifact name: loud, shout, safe-shell, grader, puller
	judge string            // cmdjudge, built for this machine
	cache string
	err   error
}

func level2Modules(t *testing.T) (mods map[string][]byte, judge, cache string) {
	t.Helper()
	level2.once.Do(func() {
		level2.wasm = map[string][]byte{}
		build := func(out, src string, wasip1 bool) error {
			cmd := exec.Command("go", "build", "-o", out, src)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if wasip1 {
				cmd.Env = append(cmd.Env, "GOOS=wasip1", "GOARCH=wasm")
			}
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("building %s: %v\n%s", src, err, b)
			}
			return nil
		}
		srcs := map[string]string{"loud": "../deploy/examples/level2/loud", "shout": "../deploy/examples/level2/shout",
			"safe-shell": "../deploy/examples/level2/safe-shell", "puller": "./testdata/wit/puller"}
		level2.cache = filepath.Join(harnessDir, "level2-cache")
		r, err := wasm.New(wasm.Config{CacheDir: level2.cache})
		if err != nil {
			level2.err = err
			return
		}
		defer r.Close()
		for name, src := range srcs {
			out := filepath.Join(harnessDir, "level2-"+name+".wasm")
			if level2.err = build(out, src, true); level2.err != nil {
				return
			}
			if level2.wasm[name], level2.err = os.ReadFile(out); level2.err != nil {
				return
			}
			if level2.err = r.Compile(context.Background(), wasm.Call{Name: name, Module: level2.wasm[name]}); level2.err != nil {
				return
			}
		}
		level2.judge = filepath.Join(harnessDir, "cmdjudge")
		level2.err = build(level2.judge, "./testdata/wit/cmdjudge", false)
	})
	if level2.err != nil {
		t.Fatal(level2.err)
	}
	return level2.wasm, level2.judge, level2.cache
}

// level2Script is the model: the hooks' questions first (rm is not safe), then the agent's tasks. A
// hook's run_inference is an inference call of the task, so "rm" has the agent's third call (not its
// second) play its third turn: the session-status call.
const level2Script = `rules:
  - match: '(?s)^Is this shell command safe\b.*\ncommand: rm\b'
    turns: [{say: 'no: rm deletes files'}]
  - match: '^Is this shell command safe\b'
    turns: [{say: 'yes'}]
  - match: '^loud (?P<text>.+)$'
    turns:
      - call: [{tool: loud, input: {text: '{{.text}}'}}]
      - call: [{tool: shout, input: {text: '{{.text}}'}}]
      - say: '{{(index .results 0).output}}'
  - match: '^pull (?P<name>\S+)$'
    turns:
      - call: [{tool: puller, input: {artifact: '{{.name}}'}}]
      - say: '{{(index .results 0).status}}: {{(index .results 0).output}}'
  - match: '^plan pull (?P<name>\S+)$'
    turns:
      - call: [{tool: submit-plan, input: {steps: [{id: s1, tool: puller, input: {artifact: '{{.name}}'}}]}}]
      - say: '{{(index .results 0).output}}'
  - match: '^echo (?P<arg>.+)$'
    turns:
      - call: [{tool: echo, input: {args: ['{{.arg}}']}}]
      - say: '{{(index .results 0).status}}: {{trim (index .results 0).output}}'
  - match: '^rm (?P<arg>.+)$'
    turns:
      - call: [{tool: rm, input: {args: ['{{.arg}}']}}]
      - say: 'never played: the hook asked the model at turn 2'
      - call: [{tool: session-status, input: {}}]
      - say: '{{(index .results 0).output}}'
  - match: ''
    turns: [{say: 'no rule for this'}]
`

// level2Capsule is a capsule's files: murmur.yaml with the blocks given after the inference block, the
// script, and the named artifacts in its project store (the example's manifests for the example's
// modules; manifests given in extra for the rest).
func level2Capsule(t *testing.T, blocks string, artifacts []string, extra map[string]string) map[string]string {
	t.Helper()
	mods, _, _ := level2Modules(t)
	files := map[string]string{
		"murmur.yaml": "name: judged\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" + blocks,
		"script.yaml": level2Script,
	}
	for _, name := range artifacts {
		dir := ".murmur/store/local/" + name + "/1.0.0/"
		if _, ok := extra[dir+"murmur.yaml"]; !ok {
			b, err := os.ReadFile(filepath.Join("../deploy/examples/level2", dir, "murmur.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			files[dir+"murmur.yaml"] = string(b)
		}
		if m, ok := mods[name]; ok {
			files[dir+"module.wasm"] = string(m)
		}
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

func startLevel2(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	_, _, cache := level2Modules(t)
	return startDoorWith(t, files, doorOptions{wasmCache: cache})
}

// pullerManifest is testdata/wit/puller's murmur.yaml.
const pullerManifest = "name: local/puller\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: module.wasm\nwit_level: 2\n" +
	"description: pulls the artifact its input names\ninput_schema:\n  type: object\n  properties: {artifact: {type: string}}\n"

// A level-2 tool pulls its companion tool with manage.pull within the call the agent made, and the agent
// calls the companion on its next turn: the pull is pull-artifact's (an agent pin in murmur.lock, the
// tool array refreshed), its record says via manage.
func TestLevel2ToolPullsItsCompanion(t *testing.T) {
	files := level2Capsule(t, "tools: [local/loud]\ncapabilities:\n  install: {tool: [local/shout], from: [stores]}\n",
		[]string{"loud", "shout"}, nil)
	f := startLevel2(t, files)
	task := sendTask(t, f.client(testOperatorToken), "loud hello there", false)
	if got := responseText(task); task.Status.State != a2ago.TaskStateCompleted || got != "HELLO THERE!" {
		t.Fatalf("task %s %q, answer %q: want the companion's HELLO THERE!", task.Status.State, statusText(task), got)
	}
	trace := traceOf(t, f.session)
	pulled := recordsOf(trace, "artifact_pulled")
	if len(pulled) != 1 || pulled[0]["artifact"] != "local/shout" || pulled[0]["via"] != "manage" || pulled[0]["origin"] != "agent" {
		t.Errorf("artifact_pulled records %v: want one of local/shout, via manage, origin agent", pulled)
	}
	refreshed := recordsOf(trace, "tools_refreshed")
	if len(refreshed) != 1 || refreshed[0]["trigger"] != "agent" || fmt.Sprint(refreshed[0]["added"]) != "[shout]" {
		t.Errorf("tools_refreshed records %v: want one, trigger agent, adding shout", refreshed)
	}
	lock, err := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
	if err != nil || !strings.Contains(string(lock), "name: local/shout") || !strings.Contains(string(lock), "origin: agent") {
		t.Errorf("murmur.lock %q (%v): want local/shout pinned by the agent", lock, err)
	}
}

// manage.pull refuses what pull-artifact refuses, with its texts: a reserved name is E-CAP-013 and leaves
// murmur.lock as it was; a capsule without capabilities.install installs nothing.
func TestLevel2ManagePullRefusals(t *testing.T) {
	t.Run("reserved name", func(t *testing.T) {
		files := level2Capsule(t, "tools: [local/puller]\ncapabilities:\n  install: {tool: ['*'], from: [stores]}\n",
			[]string{"puller"}, map[string]string{".murmur/store/local/puller/1.0.0/murmur.yaml": pullerManifest})
		f := startLevel2(t, files)
		before, err := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if err != nil {
			t.Fatal(err)
		}
		task := sendTask(t, f.client(testOperatorToken), "pull murmur/delegate-task", false)
		got := responseText(task)
		if !strings.HasPrefix(got, "error: not-granted: ") || !strings.Contains(got, "E-CAP-013") || !strings.Contains(got, "delegate-task") {
			t.Errorf("answer %q: want the tool to report pull-artifact's not-granted: E-CAP-013 refusal", got)
		}
		after, _ := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if string(after) != string(before) {
			t.Errorf("murmur.lock changed:\n%s\nwas\n%s", after, before)
		}
		if p := recordsOf(traceOf(t, f.session), "artifact_pulled"); len(p) != 0 {
			t.Errorf("artifact_pulled records %v after a refusal", p)
		}
	})
	t.Run("in a plan step", func(t *testing.T) {
		// The capsule may pull local/shout (pulling it outside a plan succeeds), but a pull from a plan step
		// is refused as pull-artifact's own call from a plan step is, and installs nothing.
		files := level2Capsule(t, "tools: [local/puller]\ncapabilities:\n  plan: {submit: true}\n  install: {tool: [local/shout], from: [stores]}\n",
			[]string{"puller", "shout"}, map[string]string{".murmur/store/local/puller/1.0.0/murmur.yaml": pullerManifest})
		f := startLevel2(t, files)
		before, err := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if err != nil {
			t.Fatal(err)
		}
		task := sendTask(t, f.client(testOperatorToken), "plan pull local/shout", false)
		steps := planResult(t, responseText(task))
		want := "not-granted: manage.pull is not callable from a plan step"
		if len(steps) != 1 || steps[0]["status"] != "error" || !strings.HasPrefix(fmt.Sprint(steps[0]["output"]), want) {
			t.Errorf("plan steps %v: want s1's error to open with %q", steps, want)
		}
		after, _ := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if string(after) != string(before) {
			t.Errorf("murmur.lock changed:\n%s\nwas\n%s", after, before)
		}
		if p := recordsOf(traceOf(t, f.session), "artifact_pulled"); len(p) != 0 {
			t.Errorf("artifact_pulled records %v after a pull from a plan step", p)
		}
		if task := sendTask(t, f.client(testOperatorToken), "pull local/shout", false); !strings.HasPrefix(responseText(task), "ok") {
			t.Errorf("the same pull outside a plan: %q, want ok", responseText(task))
		}
	})
	t.Run("no install grant", func(t *testing.T) {
		files := level2Capsule(t, "tools: [local/puller]\n", []string{"puller"},
			map[string]string{".murmur/store/local/puller/1.0.0/murmur.yaml": pullerManifest})
		f := startLevel2(t, files)
		got := responseText(sendTask(t, f.client(testOperatorToken), "pull local/puller", false))
		if want := "error: not-granted: this capsule declares no capabilities.install, so manage.pull installs nothing"; !strings.HasPrefix(got, want) {
			t.Errorf("answer %q, want it to open with %q", got, want)
		}
	})
}

// farManifest is a tool that needs WIT level 3, which this mur does not serve.
const farManifest = "name: local/far\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: module.wasm\nwit_level: 3\n" +
	"description: needs a WIT level above this mur's\ninput_schema:\n  type: object\n"

// WIT level 2 is accepted at a pull (manage.pull of the level-2 tool local/loud installs it) and at
// staging (every test here starts one); a level-3 artifact is still E-WIT-LEVEL-001 at both: manage.pull
// refuses it does-not-fit: with murmur.lock left as it was, and a session declaring one does not start.
func TestLevel2WITLevels(t *testing.T) {
	mods, _, _ := level2Modules(t)
	capsuleWith := func(t *testing.T, blocks string) map[string]string {
		return level2Capsule(t, blocks, []string{"puller", "loud"}, map[string]string{
			".murmur/store/local/puller/1.0.0/murmur.yaml": pullerManifest,
			".murmur/store/local/far/1.0.0/murmur.yaml":    farManifest,
			".murmur/store/local/far/1.0.0/module.wasm":    string(mods["shout"]),
		})
	}
	pulling := "tools: [local/puller]\ncapabilities:\n  install: {tool: ['*'], from: [stores]}\n"
	t.Run("a level-2 pull", func(t *testing.T) {
		f := startLevel2(t, capsuleWith(t, pulling))
		got := responseText(sendTask(t, f.client(testOperatorToken), "pull local/loud", false))
		if !strings.HasPrefix(got, "ok: ") || !strings.Contains(got, `"artifact":"local/loud"`) || !strings.Contains(got, `"tool_name":"loud"`) {
			t.Errorf("answer %q: want pull-artifact's data for local/loud", got)
		}
		pulled := recordsOf(traceOf(t, f.session), "artifact_pulled")
		if len(pulled) != 1 || pulled[0]["artifact"] != "local/loud" || pulled[0]["via"] != "manage" {
			t.Errorf("artifact_pulled records %v: want one of local/loud, via manage", pulled)
		}
		lock, err := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if err != nil || !strings.Contains(string(lock), "name: local/loud") {
			t.Errorf("murmur.lock %q (%v): want local/loud pinned", lock, err)
		}
	})
	t.Run("a level-3 pull", func(t *testing.T) {
		f := startLevel2(t, capsuleWith(t, pulling))
		before, err := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if err != nil {
			t.Fatal(err)
		}
		got := responseText(sendTask(t, f.client(testOperatorToken), "pull local/far", false))
		if want := "error: does-not-fit: E-WIT-LEVEL-001: "; !strings.HasPrefix(got, want) || !strings.Contains(got, "needs level 3") {
			t.Errorf("answer %q: want it to open with %q and say local/far needs level 3", got, want)
		}
		after, _ := os.ReadFile(filepath.Join(f.dir, "murmur.lock"))
		if string(after) != string(before) {
			t.Errorf("murmur.lock changed:\n%s\nwas\n%s", after, before)
		}
		if p := recordsOf(traceOf(t, f.session), "artifact_pulled"); len(p) != 0 {
			t.Errorf("artifact_pulled records %v after a refusal", p)
		}
	})
	t.Run("a level-3 tool declared", func(t *testing.T) {
		err := startError(t, capsuleWith(t, "tools: [local/puller, local/far]\n"))
		if err == nil || !strings.Contains(err.Error(), "E-WIT-LEVEL-001") || !strings.Contains(err.Error(), "local/far") ||
			!strings.Contains(err.Error(), "needs level 3") {
			t.Errorf("member.Start: %v; want E-WIT-LEVEL-001 for local/far", err)
		}
	})
}

// startError starts a session of the capsule files as startDoorWith does, and returns Start's error (a
// session that starts is closed).
func startError(t *testing.T, files map[string]string) error {
	t.Helper()
	_, _, cache := level2Modules(t)
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := capsule.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(root, "data", "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, wrapped := NewRegistry("solo")
	series, err := metrics.New(wrapped)
	if err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(root, "global-store")
	sess, err := member.Start(member.Config{
		Member: "solo", Formation: "test", Capsule: c, Store: st, Metrics: series,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: filepath.Join(root, "work"),
		ArtifactsDir: filepath.Join(root, "data", "artifacts"), WasmCacheDir: cache,
		Getenv: func(k string) string {
			if k == "MUR_STORE_DIR" {
				return global
			}
			return ""
		},
	})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sess.Close(ctx)
	}
	return err
}

// safeShell is a capsule with shell binaries under local/safe-shell, the example's level-2 policy hook;
// grant adds capabilities.hooks.inference, inference adds lines to the inference block.
func safeShell(t *testing.T, grant bool, inference string) map[string]string {
	blocks := "hooks: [local/safe-shell]\ncapabilities:\n  shell: {allow: [echo, rm]}\n"
	if grant {
		blocks += "  hooks: {inference: true}\n"
	}
	files := level2Capsule(t, blocks, []string{"safe-shell"}, nil)
	files["murmur.yaml"] = strings.Replace(files["murmur.yaml"], "inference:\n", "inference:\n"+inference, 1)
	return files
}

// A level-2 policy hook asks the session's model whether a shell command is safe: the model's no denies
// the call (the file stays), its yes allows one; each question is an inference call of the task, counted
// in session-status's turns.used and recorded with the hook's name.
func TestLevel2HookInferenceDecidesADeny(t *testing.T) {
	f := startLevel2(t, safeShell(t, true, ""))
	work := filepath.Join(filepath.Dir(f.dir), "work")
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "rm notes.txt", false)
	status := responseText(task)
	// The agent's rm call (turn 1), the hook's question (turn 2), the agent's call of session-status (3).
	if !strings.Contains(status, `"turns":{"used":3,`) {
		t.Errorf("session-status after the denial %q: want turns.used 3, the hook's question counted", status)
	}
	if _, err := os.Stat(filepath.Join(work, "notes.txt")); err != nil {
		t.Errorf("notes.txt: %v; the denied rm must not have run", err)
	}
	trace := traceOf(t, f.session)
	denied := recordsOf(trace, "tool_denied")
	if len(denied) != 1 || denied[0]["hook"] != "local/safe-shell" || denied[0]["reason"] != "the model was asked and said no: rm deletes files" {
		t.Errorf("tool_denied records %v: want one, by local/safe-shell, with the model's no", denied)
	}
	var hookCalls []map[string]any
	for _, r := range recordsOf(trace, "inference") {
		if r["hook"] != nil {
			hookCalls = append(hookCalls, r)
		}
	}
	if len(hookCalls) != 1 || hookCalls[0]["hook"] != "local/safe-shell" || hookCalls[0]["turn"] != 2.0 || hookCalls[0]["driver"] != "local" {
		t.Errorf("the hook's inference records %v: want one, naming local/safe-shell, turn 2, on the choice local", hookCalls)
	}
	if got := responseText(sendTask(t, c, "echo hi", false)); !strings.HasPrefix(got, "ok: ") || !strings.HasSuffix(got, "\nhi") {
		t.Errorf("echo hi answered %q: the model's yes should allow it", got)
	}
}

// run_inference is refused past inference.max_turns with the text that ends an agent's task there, and
// refused not-granted: without capabilities.hooks.inference; either refusal denies the call.
func TestLevel2HookInferenceRefusals(t *testing.T) {
	t.Run("past max_turns", func(t *testing.T) {
		f := startLevel2(t, safeShell(t, true, "  max_turns: 1\n"))
		task := sendTask(t, f.client(testOperatorToken), "echo hi", false)
		if task.Status.State != a2ago.TaskStateFailed || !strings.Contains(statusText(task), "the task used all 1 turns of inference.max_turns without an answer") {
			t.Errorf("task %s %q: want it failed at max_turns", task.Status.State, statusText(task))
		}
		denied := recordsOf(traceOf(t, f.session), "tool_denied")
		want := "the model could not be asked: over-limit: the task used all 1 turns of inference.max_turns; run_inference made no call"
		if len(denied) != 1 || denied[0]["reason"] != want {
			t.Errorf("tool_denied records %v: want the reason %q", denied, want)
		}
	})
	t.Run("past max_session_tokens", func(t *testing.T) {
		f := startLevel2(t, safeShell(t, true, "  max_session_tokens: 1\n"))
		sendTask(t, f.client(testOperatorToken), "echo hi", false)
		trace := traceOf(t, f.session)
		denied := recordsOf(trace, "tool_denied")
		prefix := "the model could not be asked: over-limit: the session has spent "
		suffix := " tokens, its inference.max_session_tokens ceiling of 1; run_inference made no call"
		if len(denied) != 1 || !strings.HasPrefix(fmt.Sprint(denied[0]["reason"]), prefix) || !strings.HasSuffix(fmt.Sprint(denied[0]["reason"]), suffix) {
			t.Errorf("tool_denied records %v: want the reason %q<spend>%q", denied, prefix, suffix)
		}
		for _, r := range recordsOf(trace, "inference") {
			if r["hook"] != nil {
				t.Errorf("an inference record of the hook %v, though its call was refused", r)
			}
		}
	})
	t.Run("without the grant", func(t *testing.T) {
		f := startLevel2(t, safeShell(t, false, ""))
		got := responseText(sendTask(t, f.client(testOperatorToken), "echo hi", false))
		want := "refused: denied by policy local/safe-shell: the model could not be asked: not-granted: the capsule judged does not grant its hooks inference; " +
			"set capabilities.hooks.inference: true in its murmur.yaml for local/safe-shell to make run_inference calls"
		if got != want {
			t.Errorf("answer %q\nwant %q", got, want)
		}
		for _, r := range recordsOf(traceOf(t, f.session), "inference") {
			if r["hook"] != nil {
				t.Errorf("an inference record of the hook %v, though its call was refused", r)
			}
		}
	})
}

// A level-2 command hook reaches run_inference through the endpoint its run is given (a Unix socket and a
// token in its environment), from inside the confinement of shell binaries; a level-1 command hook is
// given none.
func TestLevel2CommandHookAsksTheModel(t *testing.T) {
	_, judge, _ := level2Modules(t)
	prog, err := os.ReadFile(judge)
	if err != nil {
		t.Fatal(err)
	}
	manifest := "name: local/judge\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./judge]\nevents: [on-tool-call]\n"
	for _, tc := range []struct {
		name, level string
		want        map[string]string // task -> answer
	}{
		{"level 2", "wit_level: 2\n", map[string]string{
			"echo no thanks": "ok: exit_code: 0",
			"echo hi":        "ok: exit_code: 0"}},
		{"level 1", "", map[string]string{
			"echo hi": "refused: denied by policy local/judge: this run was given no run_inference endpoint"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := level2Capsule(t, "hooks: [local/judge]\ncapabilities:\n  shell: {allow: [echo, rm]}\n  hooks: {inference: true}\n", nil,
				map[string]string{".murmur/store/local/judge/1.0.0/murmur.yaml": manifest + tc.level, ".murmur/store/local/judge/1.0.0/judge": string(prog)})
			f := startLevel2(t, files)
			for text, want := range tc.want {
				if got := responseText(sendTask(t, f.client(testOperatorToken), text, false)); !strings.HasPrefix(got, want) {
					t.Errorf("%s answered %q, want %q", text, got, want)
				}
			}
			if tc.level == "" {
				return
			}
			// The model's no denies an rm; the hook's question was an inference call of the task.
			sendTask(t, f.client(testOperatorToken), "rm notes.txt", false)
			trace := traceOf(t, f.session)
			denied := recordsOf(trace, "tool_denied")
			if len(denied) != 1 || denied[0]["reason"] != "the model was asked and said no: rm deletes files" {
				t.Errorf("tool_denied records %v: want the rm denied with the model's no", denied)
			}
			asked := 0
			for _, r := range recordsOf(trace, "inference") {
				if r["hook"] == "local/judge" {
					asked++
				}
			}
			if asked != 3 {
				t.Errorf("%d inference records of local/judge, want 3 (two echos and the rm)", asked)
			}
		})
	}
}

// hangingModel is an OpenAI-compatible server whose answers to the agent (a request offering tools) come
// at once: a call of echo, then a text; a request without tools (a hook's run_inference) is held until its
// client gives up, and counted.
type hangingModel struct {
	mu      sync.Mutex
	held    chan struct{} // closed at the first held request
	ended   chan struct{} // closed when the first held request's client gave up
	once    sync.Once
	endOnce sync.Once
	agent   int
}

func (m *hangingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &body)
	if body["tools"] == nil {
		m.once.Do(func() { close(m.held) })
		<-r.Context().Done()
		m.endOnce.Do(func() { close(m.ended) })
		return
	}
	m.mu.Lock()
	m.agent++
	n := m.agent
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	msg := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"echo","arguments":"{\"args\":[\"hi\"]}"}}]}`
	if n%2 == 0 {
		last := body["messages"].([]any)
		content, _ := json.Marshal("after the hook: " + fmt.Sprint(last[len(last)-1].(map[string]any)["content"]))
		msg = `{"role":"assistant","content":` + string(content) + `}`
	}
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, msg)
}

// The WebAssembly limits hold inside a host call: a hook blocked in run_inference (its model does not
// answer) is ended by the hook's time limit, which denies the call, and by CancelTask, which ends the task
// at once; either way the model's request is given up.
func TestLevel2HookBlockedInRunInference(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	t.Setenv("MUR_TEST_LLM_KEY", "sk-local-test-key")
	start := func(t *testing.T) (*fixture, *hangingModel) {
		m := &hangingModel{held: make(chan struct{}), ended: make(chan struct{})}
		llm := httptest.NewServer(m)
		t.Cleanup(llm.Close)
		files := safeShell(t, true, "")
		files["murmur.yaml"] = strings.Replace(files["murmur.yaml"], "{driver: script, script: script.yaml}",
			"{driver: openai, model: m, base_url: "+llm.URL+"/v1, credential: env:MUR_TEST_LLM_KEY}", 1)
		return startLevel2(t, files), m
	}
	t.Run("time limit", func(t *testing.T) {
		f, m := start(t)
		began := time.Now()
		task := sendTask(t, f.client(testOperatorToken), "echo hi", false)
		took := time.Since(began)
		got := responseText(task)
		if !strings.Contains(got, "denied by policy local/safe-shell: the hook failed, which denies: it did not answer within 10s") {
			t.Errorf("answer %q: want the call denied by the hook's time limit", got)
		}
		select {
		case <-m.ended:
		case <-time.After(5 * time.Second):
			t.Error("the hook's request to the model was not given up")
		}
		if took > time.Minute {
			t.Errorf("the task took %s", took)
		}
	})
	t.Run("CancelTask", func(t *testing.T) {
		f, m := start(t)
		c := f.client(testOperatorToken)
		task := sendTask(t, c, "echo hi", true)
		select {
		case <-m.held:
		case <-time.After(time.Minute):
			t.Fatal("the hook never asked the model")
		}
		if _, err := c.CancelTask(context.Background(), &a2ago.CancelTaskRequest{ID: task.ID}); err != nil {
			t.Fatalf("CancelTask: %v", err)
		}
		// Well before the hook's time limit of 10s.
		ended := waitEnded(t, f, task.ID, 5*time.Second)
		if ended.Status.State != a2ago.TaskStateCanceled {
			t.Errorf("task %s %q, want canceled", ended.Status.State, statusText(ended))
		}
		select {
		case <-m.ended:
		case <-time.After(5 * time.Second):
			t.Error("the hook's request to the model was not given up")
		}
	})
}
