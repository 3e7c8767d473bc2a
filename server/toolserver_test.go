package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/fakeharness/build"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/runtimetools"
)

// fakeTools is a ToolSet: it echoes its input in a bridged-looking text and records every call.
type fakeTools struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeTools) Tools() []runtimetools.Manifest {
	return []runtimetools.Manifest{
		{Name: "expr", Description: "runs expr", InputSchema: json.RawMessage(`{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}}}`)},
		{Name: "session-status", Description: "reports the session", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
}

func (f *fakeTools) CallTool(_ context.Context, name string, input json.RawMessage) (string, bool) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+string(input))
	f.mu.Unlock()
	if name == "expr" {
		return "<untrusted-content source=tool:expr>\n" + string(input) + "\n</untrusted-content>\nnote é \x01 line", strings.Contains(string(input), "fail")
	}
	return `{"turns":{"used":1}}`, false
}

func startToolServer(t *testing.T, set harness.ToolSet) *ToolServer {
	t.Helper()
	ts, err := StartToolServer(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ts.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ts
}

// The server listens on loopback only and refuses, with 401, any request without its own token.
func TestToolServerToken(t *testing.T) {
	ts := startToolServer(t, &fakeTools{})
	host, _, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(ts.URL(), "/mcp"), "http://"))
	if host != "127.0.0.1" {
		t.Errorf("listens on %s", ts.URL())
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + ts.Token() + "x", ts.Token()} {
		req, _ := http.NewRequest("POST", ts.URL(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
}

func TestMCPConfigFile(t *testing.T) {
	ts := startToolServer(t, &fakeTools{})
	path := filepath.Join(t.TempDir(), "run", "mcp.json")
	if err := ts.WriteMCPConfig(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	url, token, err := ParseMCPConfig(b)
	if err != nil || url != ts.URL() || token != ts.Token() {
		t.Errorf("config %s: %v", b, err)
	}
}

func TestToolServerRefusesNonObjectSchema(t *testing.T) {
	_, err := StartToolServer(badSchema{}, nil)
	if err == nil || err.Error() != "tool x: its input schema is not a JSON Schema object of type object" {
		t.Errorf("error: %v", err)
	}
}

type badSchema struct{}

func (badSchema) Tools() []runtimetools.Manifest {
	return []runtimetools.Manifest{{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}}
}
func (badSchema) CallTool(context.Context, string, json.RawMessage) (string, bool) { return "", false }

// The fake harness, a real MCP client on the go-sdk in a real subprocess, lists the tools and gets each
// result's text byte for byte, with the error flag.
func TestFakeHarnessOverToolServer(t *testing.T) {
	bin, err := build.FakeHarness(harnessDir)
	if err != nil {
		t.Fatal(err)
	}
	set := &fakeTools{}
	ts := startToolServer(t, set)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	if err := ts.WriteMCPConfig(cfg); err != nil {
		t.Fatal(err)
	}
	for _, dialect := range []string{"murmur-jsonl", "claude-stream-json"} {
		t.Run(dialect, func(t *testing.T) {
			logPath := filepath.Join(dir, dialect+".jsonl")
			prompt := "call expr {\"args\":[\"1\",\"+\",\"2\"]}\ncall expr {\"args\":[\"fail\"]}\ncall session-status\nsay 3"
			cmd := exec.Command(bin, "-dialect", dialect, "-mcp-config", cfg, "-log", logPath, prompt)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("fake harness: %v\n%s", err, out)
			}
			var got []map[string]any
			b, _ := os.ReadFile(logPath)
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
			if len(got) != 5 {
				t.Fatalf("log:\n%s", b)
			}
			var names []string
			for _, tool := range got[1]["tools"].([]any) {
				names = append(names, tool.(map[string]any)["name"].(string))
			}
			if diff := cmp.Diff([]string{"expr", "session-status"}, names); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			want := []map[string]any{
				{"kind": "result", "tool": "expr", "is_error": false, "text": "<untrusted-content source=tool:expr>\n{\"args\":[\"1\",\"+\",\"2\"]}\n</untrusted-content>\nnote é \x01 line"},
				{"kind": "result", "tool": "expr", "is_error": true, "text": "<untrusted-content source=tool:expr>\n{\"args\":[\"fail\"]}\n</untrusted-content>\nnote é \x01 line"},
				{"kind": "result", "tool": "session-status", "is_error": false, "text": `{"turns":{"used":1}}`},
			}
			if diff := cmp.Diff(want, got[2:]); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(out), `"3"`) {
				t.Errorf("stdout has no answer:\n%s", out)
			}
		})
	}
	// A harness killed mid-session leaves its MCP session open until the runtime ends it.
	cmd := exec.Command(bin, "-mcp-config", cfg, "-log", filepath.Join(dir, "hang.jsonl"), "call session-status\nhang")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), `"type":"turn"`) {
	}
	cmd.Process.Kill()
	cmd.Wait()
	if n := len(slices.Collect(ts.mcp.Sessions())); n != 1 {
		t.Errorf("%d MCP sessions after the harness was killed, want its 1", n)
	}
	ts.EndSessions()
	if n := len(slices.Collect(ts.mcp.Sessions())); n != 0 {
		t.Errorf("%d MCP sessions after EndSessions", n)
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if diff := cmp.Diff(7, len(set.calls)); diff != "" {
		t.Errorf("calls %q", set.calls)
	}
	if set.calls[2] != "session-status {}" {
		t.Errorf("an empty input reaches the tool as {}: %q", set.calls[2])
	}
}
