package member

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/murmur-run/murmur/member/converse"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/hooks"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// The limits of a tool artifact's call, and of a hook's run (DESIGN §10: a time and a memory limit).
const (
	wasmTimeout  = 30 * time.Second
	wasmMemoryMB = 256
	// hookReopensDefault bounds the reopens on-task-end hooks may ask for when lifecycle.max_task_reopens
	// is not set, so a hook that always asks cannot keep a task open forever.
	hookReopensDefault = 3
)

// sessionArtifacts is what a session holds of artifacts: the tools murmur.yaml declares and those the
// agent pulled, the dispatch allowlist, the operator's skills, the hooks and the WebAssembly runner.
type sessionArtifacts struct {
	allow     *artifact.Allowlist
	installer *artifact.Installer // nil without capabilities.install
	declared  map[string]*artifact.Artifact
	skills    []artifact.Skill // the operator's, in murmur.yaml's order
	hooks     *hooks.Set
	runner    *wasm.Runner
	everyTurn bool

	mu      sync.Mutex
	digests map[string]string // module path -> sha256 of its bytes
	hookDir string            // command hooks' copies, readable to their confined runs; removed at close
}

// stageArtifacts resolves, verifies and pins what murmur.yaml declares (tools:, skills:, hooks:), copies
// the tools into the runtime directory's tools/<name>/, builds the hooks and, with capabilities.install,
// the installer pull-artifact and remove-artifact answer through.
func (s *Session) stageArtifacts(runtimeDir string) (*sessionArtifacts, error) {
	c := s.cfg.Capsule
	sa := &sessionArtifacts{allow: &artifact.Allowlist{}, declared: map[string]*artifact.Artifact{}, digests: map[string]string{},
		everyTurn: c.IsAgent() && c.Inference.ToolRefresh == capsule.ToolRefreshEveryTurn}
	project := s.cfg.ProjectDir
	if project == "" {
		project = c.Dir
	}
	stores := artifact.Stores(project, s.cfg.Getenv, s.cfg.Getenv("HOME"))
	inst := c.Capabilities.Install
	granted := c.IsAgent() && c.Transport != capsule.TransportProcess && len(inst.Tool)+len(inst.Skill)+len(inst.From) > 0
	declared := artifact.Declared{Tools: c.Tools, Skills: c.Skills, Hooks: c.Hooks}
	if len(declared.Tools)+len(declared.Skills)+len(declared.Hooks) == 0 && !granted {
		return sa, nil
	}
	cacheDir := s.cfg.WasmCacheDir
	if cacheDir == "" && s.cfg.DataDir != "" {
		cacheDir = filepath.Join(s.cfg.DataDir, "wasm-cache")
	}
	runner, err := wasm.New(wasm.Config{CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	sa.runner = runner
	fail := func(err error) (*sessionArtifacts, error) {
		sa.close()
		return nil, fmt.Errorf("member %s: %w", s.cfg.Member, err)
	}
	arts, err := artifact.StageDeclared(context.Background(), stores, artifact.LockPath(c.Dir), declared, true)
	if err != nil {
		return fail(err)
	}
	var hookList []hooks.Hook
	for _, a := range arts {
		m := a.Manifest
		switch m.Runtime {
		case artifact.RuntimeTool:
			placed, err := artifact.CopyTo(a, filepath.Join(runtimeDir, "tools", m.Name.Tool()))
			if err != nil {
				return fail(err)
			}
			if err := sa.compile(context.Background(), placed); err != nil {
				return fail(fmt.Errorf("%s: %s@%s: %w", c.Path, m.Name, m.Version, err))
			}
			sa.declared[m.Name.Tool()] = placed
			if err := sa.allow.Add(m.Name); err != nil {
				return fail(err)
			}
		case artifact.RuntimeSkill:
			sk, err := artifact.ReadSkill(a, artifact.OriginOperator)
			if err != nil {
				return fail(err)
			}
			sa.skills = append(sa.skills, sk)
		case artifact.RuntimeHook:
			h := hooks.Hook{Name: string(m.Name)}
			for _, e := range m.Events {
				h.Events = append(h.Events, string(e))
			}
			if m.Implementation == artifact.ImplWASM {
				if err := sa.compile(context.Background(), a); err != nil {
					return fail(fmt.Errorf("%s: %s@%s: %w", c.Path, m.Name, m.Version, err))
				}
				h.Runner = s.wasmHook(sa, a)
			} else {
				// The store may be inside the data directory (.murmur/ beside the roster), which no
				// command may read: the hook runs from a copy of its own.
				if sa.hookDir == "" {
					if sa.hookDir, err = os.MkdirTemp("", "mur-hooks-"); err != nil {
						return fail(err)
					}
				}
				placed, err := artifact.CopyTo(a, filepath.Join(sa.hookDir, m.Name.Tool()))
				if err != nil {
					return fail(err)
				}
				h.Runner = s.commandHook(placed)
			}
			hookList = append(hookList, h)
		}
	}
	if sa.hooks, err = hooks.New(hooks.Config{Hooks: hookList, Recorder: s.records}); err != nil {
		return fail(err)
	}
	if granted {
		g, err := artifact.NewGrant(inst.Tool, inst.Skill, inst.From)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", c.Path, err))
		}
		finder := &artifact.Finder{Stores: stores}
		if g.Sources {
			srcs, err := artifact.ReadSources(artifact.SourcesPath(project))
			if err != nil {
				return fail(err)
			}
			finder.Sources = srcs
			fetchDir := filepath.Join(runtimeDir, "fetch")
			if err := os.MkdirAll(fetchDir, 0o700); err != nil {
				return fail(err)
			}
			finder.Fetcher = &artifact.Fetcher{Base: artifact.GitHubBase(s.cfg.Getenv), Client: s.cfg.HTTPClient, TempDir: fetchDir}
		}
		sa.installer = artifact.NewInstaller(artifact.InstallConfig{Grant: g, Finder: finder, LockPath: artifact.LockPath(c.Dir),
			ToolsDir: filepath.Join(runtimeDir, "tools"), SkillsDir: filepath.Join(runtimeDir, "skills"),
			Allowlist: sa.allow, Declared: declared.Names(),
			Check: func(ctx context.Context, a *artifact.Artifact) error { return sa.compile(ctx, a) }})
	}
	return sa, nil
}

// close frees the compiled modules.
func (sa *sessionArtifacts) close() {
	if sa == nil {
		return
	}
	if sa.runner != nil {
		sa.runner.Close()
	}
	if sa.hookDir != "" {
		os.RemoveAll(sa.hookDir)
	}
}

// modulePath is the module file of a WebAssembly artifact.
func modulePath(a *artifact.Artifact) string {
	return filepath.Join(a.Dir, filepath.FromSlash(a.Manifest.Module))
}

// moduleDigest returns the digest of a's module, hashing it once per path.
func (sa *sessionArtifacts) moduleDigest(a *artifact.Artifact) (string, error) {
	p := modulePath(a)
	sa.mu.Lock()
	d, ok := sa.digests[p]
	sa.mu.Unlock()
	if ok {
		return d, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	d = "sha256:" + hex.EncodeToString(sum[:])
	sa.mu.Lock()
	sa.digests[p] = d
	sa.mu.Unlock()
	return d, nil
}

// compile compiles a's module ahead of its first call, refusing a module that cannot run.
func (sa *sessionArtifacts) compile(ctx context.Context, a *artifact.Artifact) error {
	d, err := sa.moduleDigest(a)
	if err != nil {
		return err
	}
	return sa.runner.Compile(ctx, wasm.Call{Name: a.Manifest.Name.Tool(), Path: modulePath(a), Digest: d})
}

// toolArtifact returns the tool artifact the model calls name, declared or pulled, when it is on the
// allowlist.
func (sa *sessionArtifacts) toolArtifact(name string) (*artifact.Artifact, bool) {
	if sa == nil || !sa.allow.Contains(name) {
		return nil, false
	}
	if a, ok := sa.declared[name]; ok {
		return a, true
	}
	if sa.installer != nil {
		return sa.installer.Tool(name)
	}
	return nil, false
}

// toolArtifacts returns every tool artifact of the session, sorted by tool name.
func (sa *sessionArtifacts) toolArtifacts() []*artifact.Artifact {
	if sa == nil {
		return nil
	}
	var out []*artifact.Artifact
	for _, name := range sa.allow.Names() {
		if a, ok := sa.toolArtifact(name); ok {
			out = append(out, a)
		}
	}
	return out
}

// allSkills returns the operator's skills, then the agent's.
func (sa *sessionArtifacts) allSkills() []artifact.Skill {
	if sa == nil {
		return nil
	}
	out := slices.Clone(sa.skills)
	if sa.installer != nil {
		out = append(out, sa.installer.Skills()...)
	}
	return out
}

// changes returns what pulls and removals changed since the last call.
func (sa *sessionArtifacts) changes() (added, removed []string) {
	if sa == nil || sa.installer == nil {
		return nil, nil
	}
	return sa.installer.Changes()
}

// removed reports whether remove-artifact took the tool name out of this session.
func (sa *sessionArtifacts) removed(name string) bool {
	if sa == nil || sa.installer == nil {
		return false
	}
	_, ok := sa.installer.Removed(name)
	return ok
}

// runTool answers one call of a tool artifact on the WebAssembly runner, in the session's workdir.
func (s *Session) runTool(ctx context.Context, a *artifact.Artifact, call driver.ToolCall) runtimetools.Result {
	sa := s.art
	name := a.Manifest.Name.Tool()
	d, err := sa.moduleDigest(a)
	if err != nil {
		return runtimetools.Refused(fmt.Sprintf("%s could not be run: %v", name, err))
	}
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	mem := wasmMemoryMB
	if m := s.cfg.Capsule.Capabilities.Shell.MemoryMB; m > 0 {
		mem = m
	}
	res, err := sa.runner.Run(ctx, wasm.Call{Name: name, Path: modulePath(a), Digest: d, Input: input, Workdir: s.cfg.WorkDir,
		Timeout: wasmTimeout, MemoryMB: mem, OutputLimit: s.commands.OutputLimit()})
	if err != nil {
		return runtimetools.Refused(fmt.Sprintf("%s could not be run: %v", name, err))
	}
	out := runtimetools.Result{Status: res.Status, Output: res.Output, Summary: fmt.Sprintf("%s@%s: %s", a.Manifest.Name, a.Manifest.Version, res.Status)}
	if res.Data != nil {
		var data any
		if json.Unmarshal(res.Data, &data) == nil {
			out.Data = data
		}
	}
	if res.Failure != "" {
		out.Status, out.Output = runtimetools.StatusError, res.Failure
	}
	if res.Stopped != wasm.StopNone {
		out.Note = fmt.Sprintf("[%s] The tool was stopped by %s.", name, res.Limit)
	}
	return out
}

// wasmHook runs a WebAssembly hook: the hook's input on stdin, its answer the data of the result it
// writes ({"status": "ok", "data": {"decision": "allow"}}), in an empty directory of its own.
func (s *Session) wasmHook(sa *sessionArtifacts, a *artifact.Artifact) hooks.Runner {
	return hooks.RunnerFunc(func(ctx context.Context, in []byte, limit int) ([]byte, error) {
		d, err := sa.moduleDigest(a)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "mur-hook-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		res, err := sa.runner.Run(ctx, wasm.Call{Name: a.Manifest.Name.Tool(), Path: modulePath(a), Digest: d, Input: in,
			Workdir: dir, MemoryMB: wasmMemoryMB, OutputLimit: limit})
		switch {
		case err != nil:
			return nil, err
		case res.Failure != "":
			return nil, errors.New(res.Failure)
		case res.Status != wasm.StatusOK:
			return nil, fmt.Errorf("it answered status %s: %s", res.Status, res.Output)
		case res.Data == nil:
			return nil, errors.New(`its result has no data; a WebAssembly hook answers {"status": "ok", "data": {…}}`)
		}
		return res.Data, nil
	})
}

// commandHook runs a command hook under the confinement of shell binaries, from its artifact directory
// (which it may read), in the session's workdir.
func (s *Session) commandHook(a *artifact.Artifact) hooks.Runner {
	return hooks.RunnerFunc(func(ctx context.Context, in []byte, limit int) ([]byte, error) {
		command := slices.Clone(a.Manifest.Command)
		p, err := s.hookProgram(a.Dir, command)
		if err != nil {
			return nil, err
		}
		out, errs := sandbox.Tail{Max: limit + 1}, sandbox.Tail{Max: 2 << 10}
		p.Stdin, p.Stdout, p.Stderr = bytes.NewReader(in), &out, &errs
		code, err := s.runner.Run(ctx, p)
		if err != nil {
			return nil, err
		}
		if code != 0 {
			return nil, fmt.Errorf("it exited with status %d: %s", code, strings.TrimSpace(errs.String()))
		}
		if len(out.String()) > limit {
			return nil, fmt.Errorf("it wrote more than %d bytes", limit)
		}
		return []byte(out.String()), nil
	})
}

// hookProgram resolves a command hook's program: a path with a slash inside its artifact directory, a
// bare name on the trusted PATH; the artifact directory is readable to it.
func (s *Session) hookProgram(dir string, command []string) (sandbox.Program, error) {
	name := command[0]
	path := name
	if strings.Contains(name, "/") {
		path = filepath.Join(dir, filepath.FromSlash(name))
	} else {
		p, err := sandbox.ResolveShell(name)
		if err != nil {
			return sandbox.Program{}, fmt.Errorf("%s is in none of %s", name, strings.Join(sandbox.TrustedPath, ", "))
		}
		path = p
	}
	return sandbox.Program{ID: ids.NewWorkID(), Path: path, Name: name, Args: command[1:], Read: []string{dir},
		Env: []string{"MUR_MEMBER=" + s.cfg.Member, "MUR_SESSION=" + s.id}, MemMB: s.cfg.Capsule.Capabilities.Shell.MemoryMB}, nil
}

// checkHooks asks the on-tool-call hooks about a call; a refusal text when one denies.
func (s *Session) checkHooks(ctx context.Context, task string, call driver.ToolCall) (string, bool) {
	if s.art == nil || s.art.hooks.Empty() {
		return "", true
	}
	trust := ""
	s.mu.Lock()
	if s.calls != nil {
		trust = s.calls.Trust()
	}
	s.mu.Unlock()
	d := s.art.hooks.CheckToolCall(ctx, hooks.ToolCall{Tool: call.Name, Input: call.Input, Task: task, Trust: trust})
	if d.Allow {
		return "", true
	}
	if d.Ask {
		return s.approve(ctx, task, converse.Question{Text: d.Question, Tool: call.Name, Input: call.Input, Hook: d.Hook}, d.Reason)
	}
	return d.Refusal(), false
}

// toolSpecsNow is the tool array as sent: the runtime-provided tools and shell binaries, where a tool
// artifact of the same name describes the name instead (SPEC: the shell manifest yields to it), then the
// other tool artifacts by name.
func (s *Session) toolSpecsNow() []driver.ToolSpec {
	arts := s.art.toolArtifacts()
	byName := map[string]*artifact.Artifact{}
	for _, a := range arts {
		byName[a.Manifest.Name.Tool()] = a
	}
	spec := func(a *artifact.Artifact) driver.ToolSpec {
		return driver.ToolSpec{Name: a.Manifest.Name.Tool(), Description: a.Manifest.Description, InputSchema: a.Manifest.InputSchema}
	}
	var out []driver.ToolSpec
	for _, t := range toolSpecs(s.tools) {
		if a, ok := byName[t.Name]; ok {
			out = append(out, spec(a))
			delete(byName, t.Name)
			continue
		}
		out = append(out, t)
	}
	for _, a := range arts {
		if _, ok := byName[a.Manifest.Name.Tool()]; ok {
			out = append(out, spec(a))
		}
	}
	return out
}

// inventory names every tool the model may call.
func (s *Session) inventory() []string {
	out := []string{}
	for _, t := range s.toolSpecsNow() {
		out = append(out, t.Name)
	}
	return out
}

// refreshTools re-reads the tool array and the system prompt before an inference call: after a pull or
// removal (writing tools_refreshed), and every turn under inference.tool_refresh: every_turn.
func (s *Session) refreshTools(task string, req *driver.InferRequest) {
	added, removed := s.art.changes()
	changed := len(added)+len(removed) > 0
	if !changed && (s.art == nil || !s.art.everyTurn) {
		return
	}
	req.Tools = s.toolSpecsNow()
	req.System = s.systemPrompt()
	if changed {
		s.records.Write("tools_refreshed", task, map[string]any{"trigger": "agent", "added": nonNil(added), "removed": nonNil(removed)})
	}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// taskEndHooks asks the on-task-end hooks whether a task that answered should be reopened, within
// lifecycle.max_task_reopens; the message to continue with when one asks.
func (s *Session) taskEndHooks(ctx context.Context, task, status, answer string, p *taskProgress) (string, bool) {
	if s.art == nil || s.art.hooks.Empty() {
		return "", false
	}
	limit := hookReopensDefault
	if mr := s.cfg.Capsule.Lifecycle.MaxTaskReopens; mr != nil {
		limit = *mr
	}
	s.mu.Lock()
	reopens := p.reopens
	trust := ""
	if s.calls != nil {
		trust = s.calls.Trust()
	}
	s.mu.Unlock()
	r, ok := s.art.hooks.CheckTaskEnd(ctx, hooks.TaskEnd{Task: task, Status: status, Answer: answer, Trust: trust, Reopens: reopens})
	if !ok {
		return "", false
	}
	if reopens >= limit {
		s.records.Write("hook_reopen_refused", task, map[string]any{"hook": r.Hook, "reopens": reopens, "limit": limit})
		return "", false
	}
	s.mu.Lock()
	p.reopens++
	s.mu.Unlock()
	s.records.Write("task_reopened", task, map[string]any{"reason": "hook", "hook": r.Hook, "message": r.Message, "used": reopens + 1, "left": limit - reopens - 1})
	return fmt.Sprintf("[runtime] The policy hook %s reopened the task:\n%s", r.Hook, driver.Fence("hook:"+r.Hook, r.Message, "")), true
}
