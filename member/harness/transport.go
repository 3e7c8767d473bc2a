package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// ToolSet is what a session under transport: process hands its loopback tool server (DESIGN §13,
// server.StartToolServer): its tools, and the answer to one call as the http agent loop would hand it to
// its model. Transport implements it; the server needs nothing else of the session.
type ToolSet interface {
	// Tools lists the tools the harness may call, in the order the model would see them.
	Tools() []runtimetools.Manifest
	// CallTool answers one call: the same bridged result text the http agent loop hands its model
	// (fence, note, deadline notice), and whether the call failed or was refused.
	CallTool(ctx context.Context, name string, input json.RawMessage) (text string, isError bool)
}

// ToolServer is a session's running loopback tool server (server.ToolServer).
type ToolServer interface {
	URL() string
	// EndSessions ends the MCP sessions of harness runs that are over.
	EndSessions()
	WriteMCPConfig(path string) error
	Close(ctx context.Context) error
}

// MCPConfigFile is the name of the MCP config file in the session's runtime directory.
const MCPConfigFile = "mcp.json"

// DriverName names the harness in inference records and metrics.
const DriverName = "harness"

// TransportConfig is what a session under transport: process gives its Transport: plain values, the
// session's confined starter, and callbacks into the session's dispatch and accounting.
type TransportConfig struct {
	Capsule   *capsule.Capsule // with its harness: block
	Member    string
	Formation string
	Session   string
	// RuntimeDir is the session's runtime directory, where the MCP config is written; "" makes a
	// temporary one, removed at Close.
	RuntimeDir string
	Getenv     func(string) string
	// Start starts a program under the session's confinement (sandbox.Runner.Start).
	Start func(sandbox.Program) (*sandbox.Proc, error)
	// Secrets are what Start keeps out of every program's environment (sandbox.Runner.Secrets): a
	// harness.env entry carrying one is left out at once, and named in the log and every harness_run
	// record, so the operator learns why the harness lacks it.
	Secrets []sandbox.Secret
	// Confined says whether commands run under their Landlock rules.
	Confined bool
	Log      *slog.Logger
	// StartToolServer starts the loopback tool server the harness calls the session's tools on.
	StartToolServer func(ToolSet) (ToolServer, error)
	// Tools is the tool array the http loop offers a model: the runtime-provided tools and shell
	// binaries, and the tool artifacts with their own description and schema (DESIGN §13).
	Tools func() []driver.ToolSpec
	// SystemPrompt is the system prompt the http loop would send: the capsule's instructions, its skills
	// and the plan guidance. PlaceholderInstructions stands for it; nil stands for the instructions.
	SystemPrompt func() string
	// Dispatch answers one tool call for the running task through the session's one dispatch: the text
	// the model would be handed, and whether it reports an error.
	Dispatch func(ctx context.Context, task, callID, name string, input json.RawMessage) (text string, isError bool)
	// Record writes one record of the session.
	Record records.WriteFunc
	// Turn counts one closed turn of the harness in the session's numbers (turns, tokens, spend, metrics)
	// and returns the task's turn count and the session's spend after it.
	Turn func(task string, u Usage) (turn int, spend int64)
}

// Transport is a session's process transport: its tool server, the MCP config naming it, and the
// harness runner that starts the harness confined. It is safe for concurrent use: the tool server calls
// CallTool from its own goroutines while Run runs.
type Transport struct {
	cfg     TransportConfig
	runner  *Runner
	server  ToolServer
	tmpDir  string // the runtime directory made for the config when the session has none; removed at Close
	callSeq atomic.Int64
	// envDropped are the harness.env entries left out for carrying a secret, for harness_run.
	envDropped []sandbox.Dropped

	mu    sync.Mutex
	task  *runningTask // the running task, for the tool server's calls
	quota []runtimetools.QuotaWindow
}

type runningTask struct {
	id  string
	ctx context.Context
}

// NewTransport starts the session's tool server, writes the MCP config (0600) and makes the harness
// runner. The session calls it once its tools are staged.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	c := cfg.Capsule
	h := c.Harness
	if cfg.StartToolServer == nil {
		return nil, fmt.Errorf("%s: transport: process needs the loopback tool server, which this launcher does not start", c.Path)
	}
	exe, err := sandbox.ResolveCommand(c.Dir, h.Command[0])
	if err != nil {
		return nil, fmt.Errorf("%s: harness.command: %w", c.Path, err)
	}
	tr := &Transport{cfg: cfg}
	dir := cfg.RuntimeDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mur-run-"); err != nil {
			return nil, err
		}
		tr.tmpDir = dir
	}
	srv, err := cfg.StartToolServer(tr)
	if err != nil {
		_ = tr.cleanup() // already failing: the error returned says what went wrong
		return nil, fmt.Errorf("member %s: starting the tool server: %w", cfg.Member, err)
	}
	tr.server = srv
	cfgPath := filepath.Join(dir, MCPConfigFile)
	if err := srv.WriteMCPConfig(cfgPath); err != nil {
		// Already failing: the error returned says what went wrong.
		_ = srv.Close(context.Background())
		_ = tr.cleanup()
		return nil, fmt.Errorf("member %s: writing the MCP config: %w", cfg.Member, err)
	}
	port := 0
	if u, err := url.Parse(srv.URL()); err == nil {
		port, _ = strconv.Atoi(u.Port())
	}
	env, dropped := sandbox.DropSecrets(ResolveEnv(h.Env, cfg.Getenv), cfg.Secrets)
	for _, d := range dropped {
		cfg.Log.Warn("harness.env entry left out: it would hand the harness a secret of the runtime's",
			"entry", d.Name, "reason", d.Reason, "capsule", c.Path)
	}
	tr.envDropped = dropped
	instructions := c.Instructions
	if cfg.SystemPrompt != nil {
		instructions = cfg.SystemPrompt()
	}
	tr.runner = &Runner{
		Command: h.Command, Resume: h.Resume, Dialect: Dialect(h.Dialect),
		Env: env, Read: h.Read, Network: h.Network, MCPConfig: cfgPath,
		Instructions: instructions,
		Starter:      confinedStarter{cfg: &tr.cfg, exe: exe, mcpConfig: cfgPath, port: port},
	}
	if !h.Network && cfg.Confined && sandbox.LandlockABI() < sandbox.LandlockTCPABI {
		cfg.Log.Warn("harness.network: false is not enforced on this host: its Landlock has no TCP rules (Linux 6.7 or later)", "capsule", c.Path)
	}
	return tr, nil
}

func (tr *Transport) cleanup() error {
	if tr.tmpDir != "" {
		if err := os.RemoveAll(tr.tmpDir); err != nil {
			return fmt.Errorf("removing the runtime directory made for the MCP config: %w", err)
		}
	}
	return nil
}

// URL is the tool server's address.
func (tr *Transport) URL() string { return tr.server.URL() }

// Close stops the tool server once no task runs any more.
func (tr *Transport) Close(ctx context.Context) error {
	if tr == nil {
		return nil
	}
	err := tr.server.Close(ctx)
	return errors.Join(err, tr.cleanup())
}

// confinedStarter starts a harness run under the shell binaries' confinement, with the harness's own
// grants: it reads its executable, the MCP config, the system directories and harness.read; it writes
// its workdir; the network unless harness.network is false, its tool server's port always.
type confinedStarter struct {
	cfg       *TransportConfig
	exe       string
	mcpConfig string
	port      int
}

type confinedProc struct{ p *sandbox.Proc }

func (h confinedProc) Done() <-chan struct{} { return h.p.Done }
func (h confinedProc) ExitCode() int         { return h.p.ExitCode }
func (h confinedProc) Kill()                 { h.p.Kill() }

func (h confinedStarter) Start(p Program) (Process, error) {
	env := append([]string{
		"MUR_MEMBER=" + h.cfg.Member,
		"MUR_FORMATION=" + h.cfg.Formation,
		"MUR_SESSION=" + h.cfg.Session,
	}, p.Env...)
	pr, err := h.cfg.Start(sandbox.Program{
		ID: ids.NewWorkID(), Path: h.exe, Name: p.Command[0], Args: p.Command[1:], Env: env,
		Stdout: p.Stdout, Stderr: p.Stderr,
		Harness: &sandbox.HarnessGrant{Read: append([]string{h.exe, h.mcpConfig}, p.Read...), Network: p.Network, Port: h.port},
	})
	if err != nil {
		return nil, err
	}
	return confinedProc{pr}, nil
}

// Tools is the session's tools as the tool server lists them to the harness (ToolSet): the tool array
// the http loop offers its model. A tool artifact that declares no input_schema takes any object, as
// the MCP tool list needs a schema.
func (tr *Transport) Tools() []runtimetools.Manifest {
	specs := tr.cfg.Tools()
	out := make([]runtimetools.Manifest, 0, len(specs))
	for _, t := range specs {
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, runtimetools.Manifest{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}

// CallTool answers a harness's call through the session's one dispatch, for the running task, so the
// fences, notes, records, refusals and the deadline notice are the http loop's (ToolSet). The call ends
// when the task does, or when the harness gives up on it. Its span is the child of the span ctx carries,
// when the harness sent one (CallContext), else of the task's.
func (tr *Transport) CallTool(ctx context.Context, name string, input json.RawMessage) (string, bool) {
	tr.mu.Lock()
	rt := tr.task
	tr.mu.Unlock()
	if rt == nil {
		return fmt.Sprintf("'%s' is answered only while a task runs; this session is running none", name), true
	}
	cctx, cancel := context.WithCancel(rt.ctx)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		cctx = trace.ContextWithRemoteSpanContext(cctx, sc)
	}
	if slot := conv.SpanSlotFrom(ctx); slot != nil {
		cctx = conv.WithSpanSlot(cctx, slot)
	}
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	// The harness wrote its events before it called: count them first, so the call (session-status)
	// sees the turns the harness has closed.
	tr.runner.Sync()
	id := fmt.Sprintf("harness_%d", tr.callSeq.Add(1))
	return tr.cfg.Dispatch(cctx, rt.id, id, name, input)
}

// Begin makes task the running task the tool server answers calls for, until its context ends; the
// func it returns ends it.
func (tr *Transport) Begin(ctx context.Context, task string) (end func()) {
	tr.mu.Lock()
	tr.task = &runningTask{id: task, ctx: ctx}
	tr.mu.Unlock()
	return func() {
		tr.mu.Lock()
		tr.task = nil
		tr.mu.Unlock()
	}
}

// Run runs the harness once for the running task: with the prompt, resuming the harness's session when
// session is not "". It writes the harness_run record. stopped is why the transport stopped the run
// (a limit of the capsule's inference: block), nil when it did not; err is the run's own error.
func (tr *Transport) Run(ctx context.Context, task, prompt, session string) (res Result, stopped, err error) {
	runCtx, stopRun := context.WithCancelCause(ctx)
	res, err = tr.runner.Run(runCtx, prompt, session, func(e Event) { tr.event(task, e, stopRun) })
	stopRun(nil)
	tr.server.EndSessions()
	rec := map[string]any{"resumed": session != "", "harness_session": res.Session, "exit_code": res.ExitCode,
		"events": res.Events, "garbage": res.Garbage, "answered": res.Answered}
	if err != nil {
		rec["error"] = err.Error()
	}
	if len(tr.envDropped) > 0 {
		rec["env_dropped"] = tr.envDropped
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = tr.cfg.Record(records.TypeHarnessRun, task, rec)
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		stopped = cause
	}
	return res, stopped, err
}

// event accounts for one event of the harness: a closed turn counts as an inference call (through the
// Turn callback, and an inference record), a quota window is kept for session-status and never acted on,
// a line that was no event is logged and recorded. A turn past inference.max_turns, or spend past
// inference.max_session_tokens, stops the run.
func (tr *Transport) event(task string, e Event, stop context.CancelCauseFunc) {
	inf := tr.cfg.Capsule.Inference
	switch e.Kind {
	case KindTurn:
		u := e.Usage
		turn, spend := tr.cfg.Turn(task, u)
		rec := map[string]any{"driver": DriverName, "dialect": tr.cfg.Capsule.Harness.Dialect, "turn": turn}
		if u.Reported {
			rec["measured_by"] = "actual"
			rec["tokens"] = map[string]any{"input": u.Input, "output": u.Output, "cached": u.Cached, "cache_write": u.CacheWrite}
		}
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = tr.cfg.Record(records.TypeInference, task, rec)
		if inf.MaxTurns > 0 && turn > inf.MaxTurns {
			stop(fmt.Errorf("the harness went past the %d turns of inference.max_turns without an answer, and was stopped", inf.MaxTurns))
		}
		if inf.MaxSessionTokens > 0 && spend >= inf.MaxSessionTokens {
			stop(fmt.Errorf("the session has spent %d tokens, its inference.max_session_tokens ceiling of %d; the harness was stopped and the task ends without an answer", spend, inf.MaxSessionTokens))
		}
	case KindQuota:
		q := e.Quota
		w := runtimetools.QuotaWindow{Name: q.Name, Used: q.Used, WindowMinutes: q.WindowMinutes, State: q.State}
		if q.ResetsAt != nil {
			w.ResetsAt = q.ResetsAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		tr.mu.Lock()
		replaced := false
		for i := range tr.quota {
			if tr.quota[i].Name == w.Name {
				tr.quota[i], replaced = w, true
			}
		}
		if !replaced {
			tr.quota = append(tr.quota, w)
		}
		tr.mu.Unlock()
	case KindNotice:
		tr.cfg.Log.Warn("the harness reported something the task should show", "task", task, "line", e.Line, "notice", e.Reason, "text", e.Text)
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = tr.cfg.Record(records.TypeHarnessNotice, task, map[string]any{"line": e.Line, "notice": e.Reason, "text": e.Text})
	case KindGarbage:
		tr.cfg.Log.Warn("the harness printed a line that is not an event of its dialect", "task", task, "line", e.Line, "reason", e.Reason)
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = tr.cfg.Record(records.TypeHarnessOutput, task, map[string]any{"line": e.Line, "reason": e.Reason, "text": e.Text})
	}
}

// Quota is the subscription windows the harness reported, latest of each name (session-status).
func (tr *Transport) Quota() []runtimetools.QuotaWindow {
	if tr == nil {
		return nil
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]runtimetools.QuotaWindow(nil), tr.quota...)
}
