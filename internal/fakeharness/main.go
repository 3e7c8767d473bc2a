// Command fakeharness is a stand-in for an external agent harness (such as Claude Code) under
// transport: process, for tests and the offline example: an MCP client on the official go-sdk that reads
// the MCP config file the runtime wrote, lists the session's tools, calls the ones its prompt names, and
// prints its events in either dialect (-dialect claude-stream-json | murmur-jsonl). It never runs a model:
// its prompt is its script.
//
// The prompt (the last argument) is read line by line:
//
//	call TOOL JSON      one turn that calls TOOL with the JSON input
//	quota NAME USED     reports a subscription window NAME with USED (0 to 1)
//	garbage TEXT        prints TEXT as a line of its output, which is no event
//	read PATH           tries to read the file PATH and logs whether it could (a confinement probe)
//	say TEXT            the answer (the last one wins); without one, the answer is "done"
//	env                 the answer is its environment, one NAME=value a line, sorted (a confinement probe)
//	args                the answer is its arguments (after its name) as a JSON array of strings
//	hang                after the lines before it, never exits (a test kills it, or the deadline does)
//	exit N              exits with status N, its answer unsaid
//
// Resumed (-resume SESSION), the prompt is the runtime's continuation message: it answers
// "resumed SESSION: " and the message. Every tool list, tool result and prompt it received is appended
// as a JSON line to -log (default fake-harness.jsonl in its working directory), so a test can compare
// them byte for byte. With TRACEPARENT in its environment, each tool call sends the traceparent of a
// span of its own in that trace as _meta.traceparent (and TRACESTATE as _meta.tracestate), as a harness
// that traces would, and its result's line says which (traceparent) and which span of the runtime's
// answered it (answered_in: the result's _meta.traceparent).
//
// -mode fail exits with status 3 before any event; -mode garbage prints a garbage line before every
// event; -mode hang never exits once its prompt is done. In claude-stream-json it writes what a real
// Claude Code writes, and has more verbs and modes (mcp-failed, no-tools): see claude.go.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/murmur-run/murmur/internal/mcpconfig"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type harness struct {
	dialect string
	mode    string
	session string
	out     *bufio.Writer
	log     *os.File
	stderr  io.Writer
	turns   int
	msgs    int
	claude  claudeRun
	ending  map[string]any // the result a verb ended the run with (claude-stream-json), nil none
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, code, ok := parseFlags(args, getenv, stderr)
	if !ok {
		return code
	}
	lf, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(stderr, "fakeharness:", err)
		return 1
	}
	defer func() {
		// The log is what a test compares: one that did not reach the disk is said on stderr.
		if err := lf.Close(); err != nil {
			fmt.Fprintln(stderr, "fakeharness: closing the log:", err)
		}
	}()
	h := &harness{dialect: o.dialect, mode: o.mode, out: bufio.NewWriter(stdout), log: lf, stderr: stderr, session: o.resume}
	defer h.flush()
	if h.session == "" {
		h.session = fmt.Sprintf("fh-%d", os.Getpid())
	}
	h.record(map[string]any{"kind": "prompt", "session": h.session, "resumed": o.resume != "", "prompt": o.prompt})

	cs, err := connect(ctx, o.config)
	if err != nil {
		fmt.Fprintln(stderr, "fakeharness:", err)
		return 1
	}
	// The session's end tells the server nothing it needs: the process exits next.
	defer func() { _ = cs.Close() }()
	if err := h.listTools(ctx, cs); err != nil {
		fmt.Fprintln(stderr, "fakeharness: listing tools:", err)
		return 1
	}

	answer := "done"
	if o.resume != "" {
		answer = "resumed " + o.resume + ": " + o.prompt
	} else if code, exited := h.play(ctx, cs, o.prompt, args, getenv, &answer); exited {
		return code
	}
	h.finish(len(o.prompt), answer)
	if h.mode == "hang" {
		h.flush()
		select {}
	}
	return 0
}

// options are the harness's flags, and its prompt: the last argument.
type options struct {
	dialect, config, resume, mode, logPath string

	prompt string
}

// parseFlags reads the arguments; it returns false with the exit status when the run ends there (a bad
// flag, -mode fail).
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, int, bool) {
	var o options
	fs := flag.NewFlagSet("fakeharness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dialect, "dialect", "murmur-jsonl", "claude-stream-json or murmur-jsonl")
	fs.StringVar(&o.config, "mcp-config", getenv("MUR_MCP_CONFIG"), "the MCP config file")
	fs.StringVar(&o.resume, "resume", "", "the session to resume")
	fs.StringVar(&o.mode, "mode", "normal", "normal, fail, garbage, hang, mcp-failed or no-tools")
	fs.StringVar(&o.logPath, "log", "fake-harness.jsonl", "where to append what it received")
	if err := fs.Parse(args); err != nil {
		return o, 2, false
	}
	if o.dialect != "claude-stream-json" && o.dialect != "murmur-jsonl" {
		fmt.Fprintf(stderr, "fakeharness: unknown -dialect %q\n", o.dialect)
		return o, 2, false
	}
	if o.mode == "fail" {
		fmt.Fprintln(stderr, "fakeharness: failing before any event, as -mode fail asks")
		return o, 3, false
	}
	if fs.NArg() > 0 {
		o.prompt = fs.Arg(fs.NArg() - 1)
	}
	return o, 0, true
}

// listTools lists the session's tools, records them and, in claude-stream-json, writes the init event.
func (h *harness) listTools(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	var listed []map[string]any
	for _, t := range tools.Tools {
		listed = append(listed, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
	}
	h.record(map[string]any{"kind": "tools", "tools": listed})
	h.init(tools.Tools)
	return nil
}

// play runs the prompt line by line, each line a verb (see the package documentation); answer is the
// answer so far. It returns the status and true when the verb exit ends the run.
func (h *harness) play(ctx context.Context, cs *mcp.ClientSession, prompt string, args []string, getenv func(string) string, answer *string) (int, bool) {
	sc := bufio.NewScanner(strings.NewReader(prompt))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		verb, rest, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch verb {
		case "call":
			h.call(ctx, cs, rest, len(prompt), getenv)
		case "quota":
			name, used, _ := strings.Cut(rest, " ")
			u, _ := strconv.ParseFloat(used, 64)
			h.quota(name, u)
		case "read":
			_, err := os.ReadFile(rest)
			entry := map[string]any{"kind": "read", "path": rest, "ok": err == nil}
			if err != nil {
				entry["error"] = err.Error()
			}
			h.record(entry)
		case "garbage":
			h.print(rest + "\n")
		case "say":
			*answer = rest
		case "env":
			env := os.Environ()
			slices.Sort(env)
			*answer = strings.Join(env, "\n")
		case "args":
			b, _ := json.Marshal(args)
			*answer = string(b)
		case "hang":
			h.flush()
			select {}
		case "exit":
			n, _ := strconv.Atoi(rest)
			h.flush()
			return n, true
		default:
			h.claudeVerb(verb, rest, answer)
		}
		if h.ending != nil {
			break
		}
	}
	return 0, false
}

// call is the verb call TOOL JSON: one turn that calls TOOL with the JSON input, and records its result.
func (h *harness) call(ctx context.Context, cs *mcp.ClientSession, rest string, promptLen int, getenv func(string) string) {
	name, input, _ := strings.Cut(rest, " ")
	if input == "" {
		input = "{}"
	}
	params := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(input)}
	// A harness that traces sends its tool call's span in _meta, in the trace TRACEPARENT names.
	sent := callTraceparent(getenv("TRACEPARENT"))
	if sent != "" {
		params.Meta = mcp.Meta{"traceparent": sent}
		if ts := getenv("TRACESTATE"); ts != "" {
			params.Meta["tracestate"] = ts
		}
	}
	res, err := cs.CallTool(ctx, params)
	// The turn is reported once its call is answered, so a session-status call sees exactly the turns
	// before it.
	h.turn(promptLen, 10)
	if err != nil {
		h.record(map[string]any{"kind": "call_error", "tool": name, "error": err.Error()})
		return
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	entry := map[string]any{"kind": "result", "tool": name, "is_error": res.IsError, "text": text.String()}
	if sent != "" {
		entry["traceparent"] = sent
	}
	if back, ok := res.Meta["traceparent"].(string); ok {
		entry["answered_in"] = back // the execute_tool span the runtime answered the call in
	}
	h.record(entry)
	h.event(map[string]any{"type": "user", "session_id": h.session})
}

// finish writes the run's last event: the result a verb ended it with, else the answer after one last
// turn, in the dialect's form.
func (h *harness) finish(promptLen int, answer string) {
	switch {
	case h.ending != nil:
		h.event(h.ending)
	case h.dialect == "murmur-jsonl":
		h.turn(promptLen, len(answer))
		h.event(map[string]any{"type": "answer", "text": answer, "session": h.session})
	default:
		h.turn(promptLen, len(answer))
		h.event(h.result(answer))
	}
}

// turn reports one closed model turn with a deterministic usage: 100 input tokens a turn plus the
// prompt's length, 10 output tokens plus out.
func (h *harness) turn(prompt, out int) {
	h.turns++
	in, o := 100*h.turns+prompt, 10+out
	if h.dialect == "murmur-jsonl" {
		h.event(map[string]any{"type": "turn", "usage": map[string]any{"input": in, "output": o}})
		return
	}
	h.claudeTurn(in, o)
}

func (h *harness) quota(name string, used float64) {
	if h.dialect == "murmur-jsonl" {
		h.event(map[string]any{"type": "quota", "name": name, "used": used, "resets_at": "2026-10-20T15:00:00Z",
			"window_minutes": 300, "state": "ok"})
		return
	}
	h.event(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{"status": "allowed",
		"resetsAt": 1792508400, "rateLimitType": strings.ReplaceAll(name, "-", "_"), "utilization": used}})
}

// event prints one event of the dialect; the murmur dialect has no init event.
func (h *harness) event(e map[string]any) {
	if h.dialect == "murmur-jsonl" && e["type"] != "turn" && e["type"] != "quota" && e["type"] != "answer" {
		return
	}
	if h.mode == "garbage" {
		h.print("fakeharness: this line is no event\n")
	}
	b, _ := json.Marshal(e)
	h.print(string(b) + "\n")
	h.flush()
}

// print and flush write to stdout, the pipe the runtime reads the events from. Their errors are not
// read: a write to it fails once the runtime has stopped reading, and then no one is left to tell.
// (bufio.Writer keeps a write's error, and flush meets it.)
func (h *harness) print(s string) { _, _ = h.out.WriteString(s) }

func (h *harness) flush() { _ = h.out.Flush() }

func (h *harness) record(v map[string]any) {
	b, _ := json.Marshal(v)
	if _, err := h.log.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(h.stderr, "fakeharness: writing the log:", err)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect reads the MCP config as a harness does and opens a session with the murmur server.
// callTraceparent is the traceparent of a span of its own for one tool call, a child of the span
// traceparent names, as a harness that traces would send it: the same trace, a new span id. "" when
// traceparent is "" or not one.
func callTraceparent(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return ""
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return ""
	}
	return parts[0] + "-" + parts[1] + "-" + hex.EncodeToString(id[:]) + "-" + parts[3]
}

func connect(ctx context.Context, path string) (*mcp.ClientSession, error) {
	if path == "" {
		return nil, fmt.Errorf("no MCP config: give -mcp-config or MUR_MCP_CONFIG (environment: %q)", os.Environ())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	servers, err := mcpconfig.Servers(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := servers["murmur"]
	if !ok {
		return nil, fmt.Errorf("%s: no murmur server", path)
	}
	t := &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: bearerTransport{s.Token}},
		DisableStandaloneSSE: true, MaxRetries: -1}
	client := mcp.NewClient(&mcp.Implementation{Name: "fakeharness", Version: "1"}, nil)
	return client.Connect(ctx, t, nil)
}
