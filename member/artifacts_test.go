package member

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/store"
)

// wordcount is the example tool module (deploy/examples/tools/wordcount), built for wasip1 once per
// test binary and compiled once into a compilation cache the tests' sessions share: compiling a Go
// module takes a minute or more under -race, loading it from the cache a moment.
var wordcount struct {
	once  sync.Once
	wasm  []byte
	cache string
	err   error
}

// removeWasmCache removes the shared compilation cache once the tests are done.
func removeWasmCache() {
	if wordcount.cache != "" {
		os.RemoveAll(wordcount.cache)
	}
}

func wordcountModule(t *testing.T) string {
	t.Helper()
	wordcount.once.Do(func() {
		dir, err := os.MkdirTemp("", "wordcount-")
		if err != nil {
			wordcount.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "tool.wasm")
		cmd := exec.Command("go", "build", "-o", out, "../deploy/examples/tools/wordcount")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			wordcount.err = fmt.Errorf("building the wordcount example for wasip1: %v\n%s", err, b)
			return
		}
		if wordcount.wasm, wordcount.err = os.ReadFile(out); wordcount.err != nil {
			return
		}
		if wordcount.cache, wordcount.err = os.MkdirTemp("", "member-wasm-cache-"); wordcount.err != nil {
			return
		}
		r, err := wasm.New(wasm.Config{CacheDir: wordcount.cache})
		if err != nil {
			wordcount.err = err
			return
		}
		defer r.Close()
		wordcount.err = r.Compile(context.Background(), wasm.Call{Name: "wordcount", Module: wordcount.wasm})
	})
	if wordcount.err != nil {
		t.Fatal(wordcount.err)
	}
	return string(wordcount.wasm)
}

// storeTool returns the files of a tool artifact built from the wordcount module, in the capsule's
// project store.
func storeTool(t *testing.T, files map[string]string, name, version string) {
	n := artifact.Name(name)
	d := ".murmur/store/" + n.Scope() + "/" + n.Tool() + "/" + version + "/"
	files[d+"murmur.yaml"] = fmt.Sprintf("name: %s\nversion: %s\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\ndescription: counts words\ninput_schema:\n  type: object\n  properties: {text: {type: string}}\n", name, version)
	files[d+"tool.wasm"] = wordcountModule(t)
}

func storeHook(files map[string]string, name, events, script string) {
	n := artifact.Name(name)
	d := ".murmur/store/" + n.Scope() + "/" + n.Tool() + "/1.0.0/"
	files[d+"murmur.yaml"] = fmt.Sprintf("name: %s\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: %s\n", name, events)
	files[d+"hook.sh"] = "#!/bin/sh\n" + script + "\n"
}

func artifactOpts(t *testing.T) sessionOpts {
	global := t.TempDir()
	wordcountModule(t)
	return sessionOpts{wasmCache: wordcount.cache, getenv: func(k string) string {
		if k == "MUR_STORE_DIR" {
			return global
		}
		return ""
	}}
}

func recordsOf(t *testing.T, s *Session, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range readTrace(t, s) {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

// TestToolArtifactThroughTheLoop: an agent on the script driver calls a WebAssembly tool murmur.yaml
// declares; staging pinned it, copied it into the runtime directory and listed it.
func TestToolArtifactThroughTheLoop(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("tools: [local/wordcount]\n"),
		"script.yaml": "rules:\n  - match: '^count (?P<t>.+)$'\n    turns:\n      - call: [{tool: wordcount, input: {text: '{{.t}}'}}]\n" +
			"      - say: '{{(index .results 0).status}} {{(index .results 0).output}} {{index (index .results 0).data \"words\"}} | {{join .tools \",\"}}'\n",
	}
	storeTool(t, files, "local/wordcount", "1.0.0")
	s, root := startSession(t, files, artifactOpts(t))
	if got, want := answer(s.run(t, "count one two three", Origin{})), "ok 3 words, 1 lines 3 | session-status,wordcount"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if n := testutil.ToFloat64(s.cfg.Metrics.ToolCalls.WithLabelValues("wordcount", "ok")); n != 1 {
		t.Errorf("mur_tool_calls_total{tool=wordcount,status=ok} = %v", n)
	}
	start := recordsOf(t, s.Session, "session_start")[0]
	if diff := cmp.Diff([]any{"session-status", "wordcount"}, start["tools_declared"]); diff != "" {
		t.Errorf("tools_declared (-want +got):\n%s", diff)
	}
	m, err := os.ReadFile(filepath.Join(root, "run", s.ID(), "tools", "wordcount", "murmur.yaml"))
	if err != nil || !strings.Contains(string(m), "name: local/wordcount") {
		t.Errorf("the runtime directory's tools/wordcount: %s %v", m, err)
	}
	lock, err := artifact.ReadLock(filepath.Join(s.dir, "murmur.lock"))
	if err != nil || len(lock.Pins) != 1 || lock.Pins[0].Origin != artifact.OriginOperator || lock.Pins[0].Name != "local/wordcount" {
		t.Errorf("murmur.lock %+v %v", lock, err)
	}
}

// TestDeclaredArtifactStagingErrors: a changed file refuses the next session with both digests; a
// reserved name is refused before anything is read.
func TestDeclaredArtifactStagingErrors(t *testing.T) {
	files := map[string]string{"murmur.yaml": agentCapsule("tools: [local/wordcount]\n"), "script.yaml": "rules:\n  - match: ''\n    turns: [{say: x}]\n"}
	storeTool(t, files, "local/wordcount", "1.0.0")
	d := ".murmur/store/local/wordcount/1.0.0/"
	files["murmur.lock"] = "pins:\n  - {name: local/wordcount, version: 1.0.0, digest: sha256:" + strings.Repeat("0", 64) + ", origin: operator, source: project store}\n"
	_, err := startFailing(t, files)
	if err == nil || !strings.Contains(err.Error(), "E-ART-002: tools[0]: murmur.lock conflict for 'local/wordcount': murmur.lock pins version 1.0.0 with digest sha256:"+strings.Repeat("0", 64)+", but the copy in the project store has digest sha256:") {
		t.Errorf("err = %v", err)
	}
	delete(files, "murmur.lock")
	files["murmur.yaml"] = agentCapsule("tools: [local/wordcount, ana/pull-artifact]\n")
	files[d+"murmur.yaml"] = "broken: ["
	_, err = startFailing(t, files)
	if err == nil || !strings.Contains(err.Error(), "E-CAP-013: tools[1]: ana/pull-artifact") || strings.Contains(err.Error(), "broken") {
		t.Errorf("err = %v", err)
	}
}

// startFailing starts a session expected to fail staging.
func startFailing(t *testing.T, files map[string]string) (*Session, error) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755)
	}
	c, err := capsule.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(root, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, _ := metrics.New(prometheus.NewRegistry())
	s, err := Start(Config{Member: "m", Capsule: c, Store: st, Metrics: m, RecordsRoot: filepath.Join(root, "records"),
		WorkDir: filepath.Join(root, "work"), Getenv: func(string) string { return "" }})
	if err == nil {
		s.Close(t.Context())
	}
	return s, err
}

// TestPullAndRemoveThroughTheLoop: pull-artifact makes a tool callable from the next turn; a call listed
// after remove-artifact in the same turn is refused with SPEC's text; a pulled skill joins the system
// prompt fenced.
func TestPullAndRemoveThroughTheLoop(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  install: {tool: ['local/*'], skill: [local/style]}\n"),
		"script.yaml": "rules:\n" +
			"  - match: '^pull$'\n    turns:\n" +
			"      - call: [{tool: pull-artifact, input: {artifact: local/count}}]\n" +
			"      - call: [{tool: count, input: {text: 'a b'}}]\n" +
			"      - say: '{{join .tools \",\"}} | {{(index .results 0).output}}'\n" +
			"  - match: '^first$'\n    turns:\n" +
			"      - call: [{tool: pull-artifact, input: {artifact: local/count}}]\n" +
			"      - say: '{{(index .results 0).text}}'\n" +
			"  - match: '^remove$'\n    turns:\n" +
			"      - call: [{tool: count, input: {text: 'x'}}, {tool: remove-artifact, input: {artifact: count}}, {tool: count, input: {text: 'y'}}]\n" +
			"      - say: \"{{range .results}}{{.status}}: {{.text}}\\n{{end}}\"\n" +
			"  - match: '^skill$'\n    turns:\n" +
			"      - call: [{tool: pull-artifact, input: {artifact: local/style}}]\n" +
			"      - say: '{{.system}}'\n",
	}
	storeTool(t, files, "local/count", "1.0.0")
	files[".murmur/store/local/style/1.0.0/murmur.yaml"] = "name: local/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n"
	files[".murmur/store/local/style/1.0.0/SKILL.md"] = "Answer in haiku.\n"
	s, _ := startSession(t, files, artifactOpts(t))

	want := "<untrusted-content source=tool:pull-artifact>\n" +
		`{"artifact":"local/count","fetched_from":"project store","runtime":"tool","tool_name":"count","version":"1.0.0"}` +
		"\n</untrusted-content>\ncount is in your tool list from your next turn."
	if got := answer(s.run(t, "first", Origin{})); got != want {
		t.Errorf("pull result:\n%s\nwant\n%s", got, want)
	}
	if got := answer(s.run(t, "pull", Origin{})); got != "session-status,pull-artifact,remove-artifact,count | 2 words, 1 lines" {
		t.Errorf("after the pull: %q", got)
	}
	pulled := recordsOf(t, s.Session, "artifact_pulled")
	if len(pulled) != 2 || pulled[0]["artifact"] != "local/count" || pulled[0]["fetched_from"] != "project store" {
		t.Errorf("artifact_pulled %v", pulled)
	}
	refreshed := recordsOf(t, s.Session, "tools_refreshed")
	if len(refreshed) == 0 || refreshed[0]["trigger"] != "agent" || cmp.Diff([]any{"count"}, refreshed[0]["added"]) != "" {
		t.Errorf("tools_refreshed %v", refreshed)
	}

	got := answer(s.run(t, "remove", Origin{}))
	wantLines := []string{
		"ok: <untrusted-content source=tool:count>\n1 words, 1 lines\n</untrusted-content>",
		"ok: <untrusted-content source=tool:remove-artifact>\n{\"artifact\":\"local/count\",\"removed\":true}\n</untrusted-content>\ncount is gone from your tool list from your next turn; a call to it is refused.",
		"refused: <untrusted-content source=tool:count>\ntool 'count' was removed from this session; it can no longer be called\n</untrusted-content>",
	}
	if diff := cmp.Diff(strings.Join(wantLines, "\n")+"\n", got); diff != "" {
		t.Errorf("remove turn (-want +got):\n%s", diff)
	}
	lock, _ := artifact.ReadLock(filepath.Join(s.dir, "murmur.lock"))
	if len(lock.Pins) != 0 {
		t.Errorf("pins after removal: %+v", lock.Pins)
	}
	if n := testutil.ToFloat64(s.cfg.Metrics.ArtifactPulls.WithLabelValues("tool", "ok")); n != 2 {
		t.Errorf("mur_artifact_pulls_total{runtime=tool,result=ok} = %v", n)
	}

	sys := answer(s.run(t, "skill", Origin{}))
	if !strings.Contains(sys, "## Skill: local/style\n\n<untrusted-content source=skill:local/style>\nAnswer in haiku.\n</untrusted-content>") {
		t.Errorf("system prompt after the skill pull:\n%s", sys)
	}
}

// TestHooksThroughTheLoop: an on-tool-call hook denies a call (the runtime-provided ones too) with
// SPEC's policy refusal and a tool_denied record; an on-task-end hook reopens a task once.
func TestHooksThroughTheLoop(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("tools: [local/wordcount]\nhooks: [local/guard, local/check]\n"),
		"script.yaml": "rules:\n" +
			"  - match: '^count (?P<t>.+)$'\n    turns:\n" +
			"      - call: [{tool: wordcount, input: {text: '{{.t}}'}}, {tool: session-status}]\n" +
			"      - say: \"{{range .results}}{{.status}}: {{.output}}\\n{{end}}\"\n" +
			"  - match: '^answer$'\n    turns:\n      - say: first\n      - say: checked\n",
	}
	storeTool(t, files, "local/wordcount", "1.0.0")
	storeHook(files, "local/guard", "[on-tool-call]",
		`if grep -q secret; then echo '{"decision":"deny","reason":"no secrets"}'; else echo '{"decision":"allow"}'; fi`)
	storeHook(files, "local/check", "[on-task-end]",
		`if grep -q '"reopens":0'; then echo '{"reopen":"Say checked."}'; else echo '{}'; fi`)
	s, _ := startSession(t, files, artifactOpts(t))
	got := answer(s.run(t, "count my secret", Origin{}))
	if !strings.HasPrefix(got, "refused: denied by policy local/guard: no secrets\nok: ") {
		t.Errorf("answer %q", got)
	}
	denied := recordsOf(t, s.Session, "tool_denied")
	if len(denied) != 1 || denied[0]["tool"] != "wordcount" || denied[0]["hook"] != "local/guard" {
		t.Errorf("tool_denied %v", denied)
	}
	if got := answer(s.run(t, "answer", Origin{})); got != "checked" {
		t.Errorf("reopened answer %q", got)
	}
	// Each task was reopened once (the first too: its hook saw reopens 0), never twice.
	re := recordsOf(t, s.Session, "task_reopened")
	if len(re) != 2 || re[1]["reason"] != "hook" || re[1]["hook"] != "local/check" || re[1]["used"] != 1.0 || re[0]["task"] == re[1]["task"] {
		t.Errorf("task_reopened %v", re)
	}
}

// TestToolRefreshEveryTurn: under either inference.tool_refresh a pull is in the tool array from the next
// turn (SPEC: "whatever inference.tool_refresh says"), and only the pull writes tools_refreshed, however
// often every_turn re-reads.
func TestToolRefreshEveryTurn(t *testing.T) {
	for _, mode := range []string{"every_turn", "on_change"} {
		t.Run(mode, func(t *testing.T) {
			files := map[string]string{
				"murmur.yaml": agentCapsule("  tool_refresh: " + mode + "\ncapabilities:\n  install: {tool: ['local/*']}\n"),
				"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
					"      - call: [{tool: session-status}]\n" +
					"      - call: [{tool: pull-artifact, input: {artifact: local/count}}]\n" +
					"      - call: [{tool: session-status}]\n" +
					"      - say: '{{join .tools \",\"}}'\n",
			}
			storeTool(t, files, "local/count", "1.0.0")
			s, _ := startSession(t, files, artifactOpts(t))
			if got := answer(s.run(t, "go", Origin{})); got != "session-status,pull-artifact,remove-artifact,count" {
				t.Errorf("tools after the pull: %q", got)
			}
			if n := len(recordsOf(t, s.Session, "tools_refreshed")); n != 1 {
				t.Errorf("%d tools_refreshed records, want 1 (the pull's)", n)
			}
		})
	}
}

// TestShellYieldsManifestButAnswersFirst: a tool artifact named like a shell binary describes the name in
// the inventory (the shell manifest yields to it), and a call is answered by the shell binary, which
// comes before a WASM artifact (SPEC "Reserved names").
func TestShellYieldsManifestButAnswersFirst(t *testing.T) {
	files := map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  shell: {allow: [cat]}\ntools: [local/cat]\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: cat, input: {stdin: 'from the shell'}}]\n" +
			"      - say: '{{join .tools \",\"}} | {{(index .results 0).output}}'\n",
	}
	storeTool(t, files, "local/cat", "1.0.0")
	s, root := startSession(t, files, artifactOpts(t))
	got := answer(s.run(t, "x", Origin{}))
	if !strings.HasPrefix(got, "cat,session-status | exit_code: 0") || !strings.HasSuffix(got, "from the shell") {
		t.Errorf("answer %q: want one cat in the tools, answered by the shell binary", got)
	}
	m, _ := os.ReadFile(filepath.Join(root, "run", s.ID(), "tools", "cat", "murmur.yaml"))
	if !strings.Contains(string(m), "name: local/cat") || !strings.Contains(string(m), "implementation: wasm") {
		t.Errorf("tools/cat/murmur.yaml is not the artifact's:\n%s", m)
	}
	specs := s.toolSpecsNow()
	if len(specs) != 2 || specs[0].Name != "cat" || specs[0].Description != "counts words" {
		t.Errorf("tool array %+v: want cat described by the artifact", specs)
	}
}

// TestPullFromGitHubSource: with install.from: [stores, sources], a version no store holds is fetched
// from the scope's GitHub source (MUR_GITHUB_BASE serves it from loopback), pinned with its owner, and
// written to no store.
func TestPullFromGitHubSource(t *testing.T) {
	manifest := "name: acme/count\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\ndescription: counts words\n"
	var archive bytes.Buffer
	zw := gzip.NewWriter(&archive)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{{"murmur.yaml", manifest}, {"tool.wasm", wordcountModule(t)}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(f.body))
	}
	tw.Close()
	zw.Close()
	sum := sha256.Sum256(archive.Bytes())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v3/repos/acme/artifacts":
			fmt.Fprint(w, `{"owner": {"login": "acme", "id": 4242}}`)
		case "/acme/artifacts/releases/download/count-v1.0.0/artifact.tar.gz":
			w.Write(archive.Bytes())
		case "/acme/artifacts/releases/download/count-v1.0.0/artifact.tar.gz.sha256":
			fmt.Fprintf(w, "%x  artifact.tar.gz\n", sum)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	global := t.TempDir()
	files := map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  install: {tool: ['acme/*'], from: [stores, sources]}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: pull-artifact, input: {artifact: acme/count@1.0.0}}]\n" +
			"      - call: [{tool: count, input: {text: 'x y z'}}]\n      - say: '{{(index .results 0).output}}'\n",
		".murmur/sources.yaml": "acme: github:acme/artifacts\n",
	}
	s, _ := startSession(t, files, sessionOpts{wasmCache: wordcount.cache, getenv: func(k string) string {
		return map[string]string{"MUR_STORE_DIR": global, "MUR_GITHUB_BASE": srv.URL}[k]
	}})
	if got := answer(s.run(t, "go", Origin{})); got != "3 words, 1 lines" {
		t.Errorf("answer %q", got)
	}
	lock, err := artifact.ReadLock(filepath.Join(s.dir, "murmur.lock"))
	if err != nil || len(lock.Pins) != 1 || lock.Pins[0].Source != "github:acme/artifacts" || lock.Pins[0].Owner != 4242 || lock.Pins[0].Origin != artifact.OriginAgent {
		t.Errorf("murmur.lock %+v %v", lock, err)
	}
	for _, storeDir := range []string{global, filepath.Join(s.dir, ".murmur", "store")} {
		if _, err := os.Stat(filepath.Join(storeDir, "acme")); err == nil {
			t.Errorf("the fetched artifact was written into %s", storeDir)
		}
	}
	pulled := recordsOf(t, s.Session, "artifact_pulled")
	if len(pulled) != 1 || pulled[0]["fetched_from"] != "github:acme/artifacts" {
		t.Errorf("artifact_pulled %v", pulled)
	}
}
