package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/internal/fakeharness/build"
	"github.com/murmur-run/murmur/internal/jaegertest"
	"github.com/murmur-run/murmur/member/artifact/wasm"
)

// traceFormation is three members on the script driver: lead calls worker and coder at once; worker
// runs a WebAssembly tool under a command hook and delegates to a sub-capsule (an agent of its own);
// coder is an external harness (transport: process, the fake harness) that calls a shell binary over
// its tool server.
var traceFormation = map[string]string{
	"roster.yaml": `formation: traced
entry: lead
members:
  - {name: lead, capsule: ./lead, listen: LEAD}
  - {name: worker, capsule: ./worker, listen: WORKER}
  - {name: coder, capsule: ./coder, listen: CODER}
reach:
  - {from: lead, to: [worker, coder]}
`,
	"lead/murmur.yaml": `name: lead
description: asks worker and coder at once
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
capabilities:
  network: {allow: [localhost, worker, coder]}
`,
	"lead/script.yaml": `rules:
  - match: ''
    turns:
      - call:
          - {tool: call-member, input: {member: worker, task: 'count one two three'}}
          - {tool: call-member, input: {member: coder, task: "call expr {\"args\":[\"6\",\"*\",\"7\"]}\nsay coded"}}
      - say: 'waiting for both'
      - say: 'worker: {{(index .answers 0).output}} / coder: {{(index .answers 1).output}}'
`,
	"worker/murmur.yaml": `name: worker
description: counts words with a WebAssembly tool and asks a sub-capsule
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
tools: [local/wordcount]
hooks: [local/no-secrets]
capabilities:
  spawn: {allow: [./helper]}
`,
	"worker/script.yaml": `rules:
  - match: '^count (?P<text>.+)$'
    turns:
      - call:
          - {tool: wordcount, input: {text: '{{.text}}'}}
          - {tool: delegate-task, input: {capsule: helper, task: '{{.text}}'}}
      - say: 'waiting for helper'
      - say: 'counted; helper says {{(index .answers 0).output}}'
`,
	"worker/helper/murmur.yaml": `name: helper
description: an agent sub-capsule
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
`,
	"worker/helper/script.yaml": `rules:
  - match: ''
    turns:
      - say: 'helped with {{.task}}'
`,
	"coder/murmur.yaml": `name: coder
description: the fake harness behind a door
transport: process
harness:
  command: [./fakeharness, -dialect, murmur-jsonl, -mcp-config, "{mcp_config}"]
  resume: [-resume, "{session}"]
  dialect: murmur-jsonl
inference:
  max_turns: 20
capabilities:
  shell: {allow: [expr]}
`,
}

// One request to lead, sent with the operator's traceparent, is one trace in a real collector (Jaeger,
// internal/jaegertest) across the three members, the sub-session, the WebAssembly tool, the hook and the
// harness's tool call: every span is read back from Jaeger's query API with its parent, the GenAI and
// A2A attribute names are on them, and the chat spans' tokens are the inference records' of the trace.
func TestOneTraceThroughJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	root := t.TempDir()
	addrs := freeAddrs(t, 3)
	for rel, text := range traceFormation {
		text = strings.NewReplacer("LEAD", addrs[0], "WORKER", addrs[1], "CODER", addrs[2]).Replace(text)
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyDir(t, "../../deploy/examples/tools/.murmur/store", filepath.Join(root, ".murmur", "store"))
	wasmPath := filepath.Join(root, ".murmur/store/local/wordcount/1.0.0/tool.wasm")
	cmd := exec.Command("go", "build", "-o", wasmPath, "../../deploy/examples/tools/wordcount")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the WebAssembly tool: %v\n%s", err, out)
	}
	module, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	// Compiled into the formation's cache first, as TestToolsExample does: under -race it takes long.
	r, err := wasm.New(wasm.Config{CacheDir: filepath.Join(root, ".murmur", "wasm-cache")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Compile(context.Background(), wasm.Call{Name: "wordcount", Module: module}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	bin, err := build.FakeHarness(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(root, "coder", "fakeharness"))
	rosterPath := filepath.Join(root, "roster.yaml")
	recordsDir := filepath.Join(root, "records")
	env := envOf(map[string]string{"MUR_RECORDS_DIR": recordsDir, "HOME": root,
		"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLP, "OTEL_SERVICE_NAME": "traced"})
	ctx, stop := runFormation(t, rosterPath, env, 5*time.Minute)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	// The operator's own trace: its span is the root's parent.
	traceID, parentID := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	token, err := os.ReadFile(filepath.Join(root, ".murmur", "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"go"}]}}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrs[0]+"/a2a", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	type task struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"artifacts"`
		Metadata struct {
			Murmur struct {
				TraceID string `json:"trace_id"`
				Usage   struct {
					Self, Caused, Total struct{ Input, Output int64 }
				} `json:"usage"`
			} `json:"murmur"`
		} `json:"metadata"`
	}
	var answer struct {
		Result struct{ Task task } `json:"result"`
		Error  json.RawMessage     `json:"error"`
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(raw, &answer); err != nil || answer.Error != nil {
		t.Fatalf("SendMessage: %v %s", err, raw)
	}
	if answer.Result.Task.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(raw), "worker: counted; helper says helped with one two three") ||
		!strings.Contains(string(raw), "coder: ") {
		t.Fatalf("lead's task: %s", raw)
	}
	if answer.Result.Task.Metadata.Murmur.TraceID != traceID {
		t.Errorf("lead's task names the trace %q, want the operator's %s", answer.Result.Task.Metadata.Murmur.TraceID, traceID)
	}
	stop() // mur run flushes its spans at exit
	stopped = true

	// Jaeger stores what it received in batches: the trace is read until it stops growing for a second.
	var spans []jaegertest.Span
	for deadline, stable := time.Now().Add(30*time.Second), 0; stable < 5 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got, err := j.Trace(context.Background(), traceID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 && len(got) == len(spans) {
			stable++
		} else {
			stable = 0
		}
		spans = got
	}
	byID := map[string]jaegertest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	find := func(member, name, kind string) []jaegertest.Span {
		var out []jaegertest.Span
		for _, s := range spans {
			if s.Tags["murmur.member"] == member && s.Name == name && s.Kind == kind {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(member, name, kind string) jaegertest.Span {
		t.Helper()
		ss := find(member, name, kind)
		if len(ss) != 1 {
			t.Fatalf("%d %s spans %q of %s in the trace, want 1; the trace:\n%s", len(ss), kind, name, member, listSpans(spans))
		}
		return ss[0]
	}
	parentIs := func(child, parent jaegertest.Span) {
		t.Helper()
		if child.Parent != parent.SpanID {
			t.Errorf("%s %q of %s has the parent %q (%s), want %s %q (%s)", child.Kind, child.Name, child.Tags["murmur.member"],
				byID[child.Parent].Name, child.Parent, parent.Kind, parent.Name, parent.SpanID)
		}
	}

	leadServer := one("lead", "SendMessage", "server")
	if leadServer.Parent != parentID {
		t.Errorf("lead's SendMessage has the parent %q, want the operator's span %s", leadServer.Parent, parentID)
	}
	leadAgent := one("lead", "invoke_agent lead", "internal")
	parentIs(leadAgent, leadServer)
	calls := find("lead", "execute_tool call-member", "internal")
	sends := find("lead", "SendMessage", "client")
	if len(calls) != 2 || len(sends) != 2 {
		t.Fatalf("%d call-member spans and %d sends of lead, want 2 and 2:\n%s", len(calls), len(sends), listSpans(spans))
	}
	served := map[string]jaegertest.Span{} // member → its SendMessage server span, the child of a send of lead's
	for _, c := range calls {
		parentIs(c, leadAgent)
	}
	for _, s := range sends {
		if p := byID[s.Parent]; p.Name != "execute_tool call-member" {
			t.Errorf("lead's send %s has the parent %q", s.SpanID, p.Name)
		}
		member := s.Tags["murmur.call.member"]
		srv := one(member, "SendMessage", "server")
		parentIs(srv, s)
		served[member] = srv
	}

	workerAgent := one("worker", "invoke_agent worker", "internal")
	parentIs(workerAgent, served["worker"])
	wordcount := one("worker", "execute_tool wordcount", "internal")
	parentIs(wordcount, workerAgent)
	parentIs(one("worker", "murmur.wasm wordcount", "internal"), wordcount)
	delegate := one("worker", "execute_tool delegate-task", "internal")
	parentIs(delegate, workerAgent)
	// The policy hook runs before each of worker's tool calls, under the call.
	hooked := map[string]bool{}
	for _, h := range find("worker", "murmur.hook on-tool-call", "internal") {
		hooked[h.Parent] = true
	}
	if len(hooked) != 2 || !hooked[wordcount.SpanID] || !hooked[delegate.SpanID] {
		t.Errorf("worker's hook spans have the parents %v, want its two tool calls %s and %s", hooked, wordcount.SpanID, delegate.SpanID)
	}
	sub := one("worker", "invoke_agent worker/helper", "internal")
	parentIs(sub, delegate)
	for _, c := range find("worker", "chat local", "client") {
		if c.Parent != workerAgent.SpanID && c.Parent != sub.SpanID {
			t.Errorf("worker's chat span %s has the parent %q", c.SpanID, byID[c.Parent].Name)
		}
	}

	coderAgent := one("coder", "invoke_agent coder", "internal")
	parentIs(coderAgent, served["coder"])
	expr := one("coder", "execute_tool expr", "internal")
	// The harness's tool call continues the span the harness sent in _meta.traceparent (the fake
	// harness's own, which it logs; it exports none), in the trace TRACEPARENT gave it.
	result := harnessResult(t, filepath.Join(root, ".murmur", "members", "coder", "work", "fake-harness.jsonl"))
	if want := "00-" + traceID + "-" + expr.Parent + "-01"; result["traceparent"] != want {
		t.Errorf("coder's execute_tool expr has the parent %s; the harness sent %v", expr.Parent, result["traceparent"])
	}
	// And the result's _meta.traceparent named the span that answered it.
	if want := "00-" + traceID + "-" + expr.SpanID + "-01"; result["answered_in"] != want {
		t.Errorf("the harness's result named the span %v, want coder's execute_tool expr %s", result["answered_in"], want)
	}

	// Every span but the root and the harness's call is the child of a span in the trace.
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Errorf("%s %q in trace %s", s.Kind, s.Name, s.TraceID)
		}
		if _, ok := byID[s.Parent]; !ok && s.SpanID != leadServer.SpanID && s.SpanID != expr.SpanID {
			t.Errorf("%s %q of %s has the parent %q, which is not in the trace", s.Kind, s.Name, s.Tags["murmur.member"], s.Parent)
		}
		if s.Tags["murmur.member"] == "" {
			t.Errorf("%s %q has no murmur.member", s.Kind, s.Name)
		}
	}

	// The conventions' names.
	wantTags(t, leadServer, "rpc.system.name", "rpc.method", "a2a.task.id", "a2a.task.state", "a2a.context.id")
	wantTags(t, leadAgent, "gen_ai.operation.name", "gen_ai.agent.name", "a2a.task.id", "gen_ai.conversation.id")
	wantTags(t, wordcount, "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.id", "murmur.tool.status")
	wantTags(t, sends[0], "rpc.method", "server.address", "server.port", "murmur.call.member")
	if leadAgent.Tags["a2a.task.id"] != answer.Result.Task.ID {
		t.Errorf("lead's invoke_agent names the task %q, want %q", leadAgent.Tags["a2a.task.id"], answer.Result.Task.ID)
	}

	// The chat spans' tokens are the inference records' of the trace, member by member.
	spanTokens, recordTokens := map[string][2]int64{}, map[string][2]int64{}
	chats := 0
	for _, s := range spans {
		if s.Tags["gen_ai.operation.name"] != "chat" {
			continue
		}
		chats++
		wantTags(t, s, "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
		in, _ := strconv.ParseInt(s.Tags["gen_ai.usage.input_tokens"], 10, 64)
		out, _ := strconv.ParseInt(s.Tags["gen_ai.usage.output_tokens"], 10, 64)
		m := s.Tags["murmur.member"]
		spanTokens[m] = [2]int64{spanTokens[m][0] + in, spanTokens[m][1] + out}
	}
	var all [2]int64
	filepath.WalkDir(recordsDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "trace.jsonl" {
			return err
		}
		member := "" // the session_start record names it
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Type    string `json:"type"`
				Member  string `json:"member"`
				TraceID string `json:"trace_id"`
				Tokens  struct{ Input, Output int64 }
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Type == "session_start" {
				member, _, _ = strings.Cut(rec.Member, "/")
			}
			if rec.Type != "inference" || rec.TraceID != traceID {
				continue
			}
			all[0], all[1] = all[0]+rec.Tokens.Input, all[1]+rec.Tokens.Output
			if member != "coder" { // a harness's turns are counted, but it has no chat span of ours
				recordTokens[member] = [2]int64{recordTokens[member][0] + rec.Tokens.Input, recordTokens[member][1] + rec.Tokens.Output}
			}
		}
		return sc.Err()
	})
	if chats < 5 || fmt.Sprint(spanTokens) != fmt.Sprint(recordTokens) {
		t.Errorf("%d chat spans; their tokens by member %v, the inference records' %v", chats, spanTokens, recordTokens)
	}
	// And lead's task says what the whole request cost: every inference record of the trace.
	if u := answer.Result.Task.Metadata.Murmur.Usage; u.Total.Input != all[0] || u.Total.Output != all[1] || u.Caused.Input == 0 {
		t.Errorf("lead's metadata.murmur.usage %+v; the trace's inference records sum to %v", u, all)
	}
}

func wantTags(t *testing.T, s jaegertest.Span, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, ok := s.Tags[n]; !ok {
			t.Errorf("%s %q of %s has no %s: %v", s.Kind, s.Name, s.Tags["murmur.member"], n, s.Tags)
		}
	}
}

// harnessResult is the fake harness's log line of its one tool result.
func harnessResult(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["kind"] == "result" {
			return m
		}
	}
	t.Fatalf("the fake harness logged no tool result:\n%s", b)
	return nil
}

func listSpans(spans []jaegertest.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s %q of %s, parent %s\n", s.SpanID, s.Kind, s.Name, s.Tags["murmur.member"], s.Parent)
	}
	return b.String()
}
