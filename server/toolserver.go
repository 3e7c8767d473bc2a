package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/murmur-run/murmur/internal/mcpconfig"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/harness"
)

// ToolServerName is the MCP server's name in the config file: Claude Code calls its tools
// mcp__murmur__<tool>.
const ToolServerName = "murmur"

// toolServerPath is where the MCP endpoint is served.
const toolServerPath = "/mcp"

// ToolServer is a session's loopback MCP tool server: streamable HTTP on 127.0.0.1 on a port of the
// kernel's choosing, behind a bearer token of its own, which no other server accepts and which is the
// only murmur credential the harness holds.
type ToolServer struct {
	mcp   *mcp.Server
	ln    net.Listener
	srv   *http.Server
	token string
	done  chan error
}

// StartToolServer starts the tool server of one session, serving set. Close stops it.
func StartToolServer(set harness.ToolSet, log *slog.Logger) (*ToolServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	ms := mcp.NewServer(&mcp.Implementation{Name: ToolServerName, Version: "1"}, &mcp.ServerOptions{Logger: log})
	// A call whose _meta carries a traceparent continues that trace (harness.CallContext); one without
	// is a child of the running task's span. Its result's _meta.traceparent is its execute_tool span.
	call := func(ctx context.Context, name string, meta mcp.Meta, input json.RawMessage) *mcp.CallToolResult {
		if len(input) == 0 || string(input) == "null" {
			input = json.RawMessage("{}")
		}
		slot := &conv.SpanSlot{}
		text, isError := set.CallTool(conv.WithSpanSlot(harness.CallContext(ctx, meta), slot), name, input)
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
		// The result names the execute_tool span that answered the call, so a harness that traces links
		// its own span to it (DESIGN §17).
		if tp := slot.Traceparent(); tp != "" {
			res.Meta = mcp.Meta{conv.KeyTraceparent: tp}
		}
		return res
	}
	offered := map[string]bool{}
	for _, t := range set.Tools() {
		schema := t.InputSchema
		if !objectSchema(schema) {
			return nil, fmt.Errorf("tool %s: its input schema is not a JSON Schema object of type object", t.Name)
		}
		name := t.Name
		offered[name] = true
		ms.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return call(ctx, name, req.Params.Meta, req.Params.Arguments), nil
			})
	}
	// A call of a tool the session does not offer goes to the session's dispatch as well, which refuses it
	// with the runtime's own words and records it, as the http loop does; the SDK would answer it with a
	// protocol error of its own.
	ms.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && r.Params != nil && !offered[r.Params.Name] {
				return call(ctx, r.Params.Name, r.Params.Meta, r.Params.Arguments), nil
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{Logger: log})
	mux := http.NewServeMux()
	mux.Handle(toolServerPath, requireToken(token, h))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the tool server could not listen on 127.0.0.1: %w", err)
	}
	ts := &ToolServer{mcp: ms, ln: ln, token: token, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() { ts.done <- ts.srv.Serve(ln) }()
	return ts, nil
}

// requireToken refuses, with 401 and nothing else done, a request that does not carry the token.
func requireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="murmur tool server"`)
			http.Error(w, "this tool server needs its bearer token (Authorization: Bearer …), from the MCP config file the runtime wrote", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func objectSchema(raw json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["type"] == "object"
}

// URL is the MCP endpoint, on 127.0.0.1.
func (t *ToolServer) URL() string { return "http://" + t.ln.Addr().String() + toolServerPath }

// Token is the bearer token the endpoint wants.
func (t *ToolServer) Token() string { return t.token }

// MCPConfig is the MCP config file's content: one server, named murmur, reached over HTTP with the
// token as its Authorization header (the shape Claude Code's --mcp-config reads).
func (t *ToolServer) MCPConfig() []byte {
	return mcpconfig.Encode(ToolServerName, t.URL(), t.token)
}

// WriteMCPConfig writes MCPConfig to path with mode 0600 (it holds the token), atomically: a harness
// never reads half of it.
func (t *ToolServer) WriteMCPConfig(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".mcp-*.json")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // the rename below moves it; after a failure nothing is left
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close() // already failing: the error returned says what went wrong
		return err
	}
	if _, err := f.Write(t.MCPConfig()); err != nil {
		_ = f.Close() // already failing: the error returned says what went wrong
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// EndSessions ends every MCP session the server holds: a harness that was killed, or never said
// goodbye, leaves its session open, and the runtime ends them once its run is over.
func (t *ToolServer) EndSessions() {
	for ss := range t.mcp.Sessions() {
		_ = ss.Close() // a session whose harness is gone: nothing left to tell it
	}
}

// Close stops the server: requests in flight get until ctx ends, then every connection is closed.
func (t *ToolServer) Close(ctx context.Context) error {
	err := t.srv.Shutdown(ctx)
	if err != nil {
		_ = t.srv.Close() // its connections dropped; the shutdown's error is reported
	}
	serr := <-t.done
	t.EndSessions()
	if serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// ParseMCPConfig reads the URL and token of the murmur server from an MCP config file's content, as a
// harness would.
func ParseMCPConfig(b []byte) (url, token string, err error) {
	servers, err := mcpconfig.Servers(b)
	if err != nil {
		return "", "", err
	}
	s, ok := servers[ToolServerName]
	if !ok {
		return "", "", fmt.Errorf("no %q server in the MCP config", ToolServerName)
	}
	return s.URL, s.Token, nil
}
