package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// ToolSet is what a session under transport: process hands its loopback tool server (DESIGN §13): its
// tools, and the answer to one call as the http agent loop would hand it to its model.
type ToolSet interface {
	Tools() []runtimetools.Manifest
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

// harnessDriver names the harness in inference records and metrics.
const harnessDriver = "harness"

// processState is what a session under transport: process keeps besides what every session does.
type processState struct {
	runner  *harness.Runner
	server  ToolServer
	tmpDir  string // the runtime directory made for the config when the session has none; removed at Close
	callSeq atomic.Int64
	// task is the running task's id and context, for the tool server's calls; guarded by Session.mu.
	task *processTask
}

type processTask struct {
	id  string
	ctx context.Context
	tc  *calls.Tracker
}

// startProcess starts the session's tool server, writes the MCP config (0600) and makes the harness
// runner. It runs in Start, after the tools are staged.
func (s *Session) startProcess() error {
	c := s.cfg.Capsule
	h := c.Harness
	if s.cfg.StartToolServer == nil {
		return fmt.Errorf("%s: transport: process needs the loopback tool server, which this launcher does not start", c.Path)
	}
	exe, err := sandbox.ResolveCommand(c.Dir, h.Command[0])
	if err != nil {
		return fmt.Errorf("%s: harness.command: %w", c.Path, err)
	}
	dir := ""
	ps := &processState{}
	if s.cfg.RuntimeRoot != "" {
		dir = filepath.Join(s.cfg.RuntimeRoot, s.id)
	} else {
		if dir, err = os.MkdirTemp("", "mur-run-"); err != nil {
			return err
		}
		ps.tmpDir = dir
	}
	srv, err := s.cfg.StartToolServer(sessionTools{s})
	if err != nil {
		ps.cleanup()
		return fmt.Errorf("member %s: starting the tool server: %w", s.cfg.Member, err)
	}
	ps.server = srv
	cfgPath := filepath.Join(dir, MCPConfigFile)
	if err := srv.WriteMCPConfig(cfgPath); err != nil {
		srv.Close(context.Background())
		ps.cleanup()
		return fmt.Errorf("member %s: writing the MCP config: %w", s.cfg.Member, err)
	}
	port := 0
	if u, err := url.Parse(srv.URL()); err == nil {
		port, _ = strconv.Atoi(u.Port())
	}
	ps.runner = &harness.Runner{
		Command: h.Command, Resume: h.Resume, Dialect: harness.Dialect(h.Dialect),
		Env: harness.ResolveEnv(h.Env, s.cfg.Getenv), Read: h.Read, Network: h.Network, MCPConfig: cfgPath,
		Instructions: c.Instructions,
		Starter:      harnessStarter{s: s, exe: exe, mcpConfig: cfgPath, port: port},
	}
	if !h.Network && s.confined() && sandbox.LandlockABI() < sandbox.LandlockTCPABI {
		s.log.Warn("harness.network: false is not enforced on this host: its Landlock has no TCP rules (Linux 6.7 or later)", "capsule", c.Path)
	}
	s.proc = ps
	return nil
}

func (ps *processState) cleanup() {
	if ps.tmpDir != "" {
		os.RemoveAll(ps.tmpDir)
	}
}

// closeProcess stops the tool server once no task runs any more.
func (s *Session) closeProcess(ctx context.Context) error {
	if s.proc == nil {
		return nil
	}
	err := s.proc.server.Close(ctx)
	s.proc.cleanup()
	return err
}

// harnessStarter starts a harness run under the shell binaries' confinement, with the harness's own
// grants: it reads its executable, the MCP config, the system directories and harness.read; it writes
// its workdir; the network unless harness.network is false, its tool server's port always.
type harnessStarter struct {
	s         *Session
	exe       string
	mcpConfig string
	port      int
}

type harnessProc struct{ p *sandbox.Proc }

func (h harnessProc) Done() <-chan struct{} { return h.p.Done }
func (h harnessProc) ExitCode() int         { return h.p.ExitCode }
func (h harnessProc) Kill()                 { h.p.Kill() }

func (h harnessStarter) Start(p harness.Program) (harness.Process, error) {
	s := h.s
	env := append([]string{
		"MUR_MEMBER=" + s.cfg.Member,
		"MUR_FORMATION=" + s.cfg.Formation,
		"MUR_SESSION=" + s.id,
	}, p.Env...)
	pr, err := s.runner.Start(sandbox.Program{
		ID: ids.NewWorkID(), Path: h.exe, Name: p.Command[0], Args: p.Command[1:], Env: env,
		Stdout: p.Stdout, Stderr: p.Stderr,
		Harness: &sandbox.HarnessGrant{Read: append([]string{h.exe, h.mcpConfig}, p.Read...), Network: p.Network, Port: h.port},
	})
	if err != nil {
		return nil, err
	}
	return harnessProc{pr}, nil
}

// sessionTools is the session as its tool server sees it.
type sessionTools struct{ s *Session }

func (st sessionTools) Tools() []runtimetools.Manifest { return st.s.tools.Manifests() }

// CallTool answers a harness's call through the session's one dispatch, for the running task, so the
// fences, notes, records, refusals and the deadline notice are the http loop's. The call ends when the
// task does, or when the harness gives up on it.
func (st sessionTools) CallTool(ctx context.Context, name string, input json.RawMessage) (string, bool) {
	s := st.s
	s.mu.Lock()
	pt := s.proc.task
	s.mu.Unlock()
	if pt == nil {
		return fmt.Sprintf("'%s' is answered only while a task runs; this session is running none", name), true
	}
	cctx, cancel := context.WithCancel(pt.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	id := fmt.Sprintf("harness_%d", s.proc.callSeq.Add(1))
	r := s.dispatch(cctx, pt.id, driver.ToolCall{ID: id, Name: name, Input: input})
	return r.Text, r.Status != runtimetools.StatusOK
}

// runProcess runs one task under transport: process: the harness with the task text as its prompt;
// when it ends its run with member calls out, the task waits for their answers (SPEC "How the answer
// arrives") and resumes the harness's same session with the continuation message as the prompt. A
// harness that called end-without-answer and kept going ends the task the same way once it finishes.
func (s *Session) runProcess(ctx context.Context, t *a2a.Task, text string) (string, error) {
	inf := s.cfg.Capsule.Inference
	if ids.Get(murmurMeta(t), ids.MetaTrust) == TrustUntrusted {
		text = driver.Fence("task", text, "")
	}
	task := string(t.ID)
	cctx, cancelCalls := context.WithCancel(ctx)
	tc := s.startCalls(cctx, t)
	dctx, cancelDelegations := context.WithCancel(ctx)
	dt := s.startDelegations(dctx, t)
	s.mu.Lock()
	s.calls, s.delegations, s.callsTask = tc, dt, task
	s.proc.task = &processTask{id: task, ctx: ctx, tc: tc}
	s.mu.Unlock()
	defer func() {
		tc.Finish(cancelCalls)
		dt.Finish(cancelDelegations)
		s.mu.Lock()
		s.calls, s.delegations, s.callsTask = nil, nil, ""
		s.proc.task = nil
		s.mu.Unlock()
	}()
	prompt, session := text, ""
	for {
		runCtx, stopRun := context.WithCancelCause(ctx)
		res, err := s.proc.runner.Run(runCtx, prompt, session, func(e harness.Event) { s.harnessEvent(task, e, stopRun) })
		stopRun(nil)
		s.proc.server.EndSessions()
		rec := map[string]any{"resumed": session != "", "harness_session": res.Session, "exit_code": res.ExitCode,
			"events": res.Events, "garbage": res.Garbage, "answered": res.Answered}
		if err != nil {
			rec["error"] = err.Error()
		}
		s.records.Write("harness_run", task, rec)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if reason, ok := tc.NoAnswer(); ok {
			return "", &errNoAnswer{reason: reason, below: calls.NoAnswerBelow(tc.Latest())}
		}
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			return "", cause
		}
		if err != nil {
			return "", err
		}
		s.mu.Lock()
		turns := s.progress.turns
		s.mu.Unlock()
		out, undelivered, _ := tc.Pending()
		dout, dundelivered, _ := dt.Pending()
		if out+undelivered+dout+dundelivered > 0 && (inf.MaxTurns == 0 || turns < inf.MaxTurns) {
			if res.Session == "" {
				return "", fmt.Errorf("the harness reported no session id, so it cannot be resumed with the answers of the members it called (dialect %s)", s.cfg.Capsule.Harness.Dialect)
			}
			if len(s.cfg.Capsule.Harness.Resume) == 0 {
				return "", fmt.Errorf("the harness called members, but %s sets no harness.resume, so it cannot be resumed with their answers; add resume: [--resume, \"{session}\"] or what the harness takes", s.cfg.Capsule.Path)
			}
			if err := s.waitCalls(ctx, t, tc, dt); err != nil {
				return "", err
			}
			round, latest := tc.Round()
			outcomes := dt.Round()
			s.continued(t, len(round), len(outcomes))
			prompt, session = calls.Continuation(round, latest, outcomes, tc.Caller()), res.Session
			continue
		}
		if strings.TrimSpace(res.Answer) == "" {
			return "", errors.New("the harness ended its run with an empty answer")
		}
		if below := calls.NoAnswerBelow(tc.Latest()); len(below) > 0 {
			ids.Set(murmurMeta(t), ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(below))
		}
		return res.Answer, nil
	}
}

// harnessEvent accounts for one event of the harness: a closed turn counts as an inference call (turns,
// tokens, spend, an inference record), a quota window is kept for session-status and never acted on,
// a line that was no event is logged and recorded. A turn past inference.max_turns, or spend past
// inference.max_session_tokens, stops the run.
func (s *Session) harnessEvent(task string, e harness.Event, stop context.CancelCauseFunc) {
	inf := s.cfg.Capsule.Inference
	switch e.Kind {
	case harness.KindTurn:
		u := e.Usage
		s.mu.Lock()
		turn := 0
		if s.progress != nil {
			s.progress.turns++
			turn = s.progress.turns
		}
		if u.Reported {
			s.spend += u.Input + u.Output
		}
		s.countTokensLocked(u.Reported, u.CacheReported, u.Input, u.Output, u.Cached, u.CacheWrite)
		spend := s.spend
		s.mu.Unlock()
		s.countInference(harnessDriver, driver.Usage{Input: u.Input, Output: u.Output, Cached: u.Cached, CacheWrite: u.CacheWrite, Reported: u.Reported})
		rec := map[string]any{"driver": harnessDriver, "dialect": s.cfg.Capsule.Harness.Dialect, "turn": turn}
		if u.Reported {
			rec["measured_by"] = "actual"
			rec["tokens"] = map[string]any{"input": u.Input, "output": u.Output, "cached": u.Cached, "cache_write": u.CacheWrite}
		}
		s.records.Write("inference", task, rec)
		if inf.MaxTurns > 0 && turn > inf.MaxTurns {
			stop(fmt.Errorf("the harness went past the %d turns of inference.max_turns without an answer, and was stopped", inf.MaxTurns))
		}
		if inf.MaxSessionTokens > 0 && spend >= inf.MaxSessionTokens {
			stop(fmt.Errorf("the session has spent %d tokens, its inference.max_session_tokens ceiling of %d; the harness was stopped and the task ends without an answer", spend, inf.MaxSessionTokens))
		}
	case harness.KindQuota:
		q := e.Quota
		w := runtimetools.QuotaWindow{Name: q.Name, Used: q.Used, WindowMinutes: q.WindowMinutes, State: q.State}
		if q.ResetsAt != nil {
			w.ResetsAt = q.ResetsAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		s.mu.Lock()
		replaced := false
		for i := range s.quota {
			if s.quota[i].Name == w.Name {
				s.quota[i], replaced = w, true
			}
		}
		if !replaced {
			s.quota = append(s.quota, w)
		}
		s.mu.Unlock()
	case harness.KindGarbage:
		s.log.Warn("the harness printed a line that is not an event of its dialect", "task", task, "line", e.Line, "reason", e.Reason)
		s.records.Write("harness_output", task, map[string]any{"line": e.Line, "reason": e.Reason, "text": e.Text})
	}
}
