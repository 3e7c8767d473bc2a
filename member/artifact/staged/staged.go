package staged

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/hooks"
	"github.com/murmur-run/murmur/member/sandbox"
)

// The limits of a tool artifact's call, and of a hook's run (DESIGN §10: a time and a memory limit).
const (
	wasmTimeout  = 30 * time.Second
	wasmMemoryMB = 256
	// hookReopensDefault bounds the reopens on-task-end hooks may ask for when lifecycle.max_task_reopens
	// is not set, so a hook that always asks cannot keep a task open forever.
	hookReopensDefault = 3
)

// Config is what Stage needs of the session: plain values and the session's runner and records.
type Config struct {
	Capsule *capsule.Capsule
	Member  string // MUR_MEMBER of a command hook
	Session string // MUR_SESSION of a command hook
	// ProjectDir is where the project store is (.murmur/store/ in it); "" means the capsule's directory.
	ProjectDir string
	// DataDir is the formation's data directory; "" when there is none.
	DataDir string
	// WasmCacheDir keeps compiled modules across sessions; "" means DataDir/wasm-cache (none without a
	// data directory).
	WasmCacheDir string
	// RuntimeDir is the session's runtime directory: tools are copied into RuntimeDir/tools/<name>/.
	RuntimeDir string
	Getenv     func(string) string
	HTTPClient *http.Client // what a pull from a source fetches with
	Recorder   hooks.Recorder
	// Runner starts command hooks, confined as shell binaries are.
	Runner *sandbox.Runner
	// Workdir is where a tool artifact's call runs.
	Workdir string
	// OutputLimit is how much of a tool's output the model is shown, in bytes.
	OutputLimit int
	// Log is told of a WebAssembly call given up on while blocked in a host call; nil discards.
	Log *slog.Logger
	// ToolHost answers what a WIT level 2 tool artifact asks during a call for a task (manage_pull), and
	// HookHost what a level-2 hook asks during its run (run_inference); nil refuses every such call.
	// ToolHost's inPlan says the call is a step of a plan.
	ToolHost func(task string, inPlan bool) wit.Functions
	HookHost func(task, hook string) wit.Functions
}

// Set is what a session holds of artifacts: the tools murmur.yaml declares and those the agent pulled,
// the dispatch allowlist, the operator's skills, the hooks and the WebAssembly runner.
type Set struct {
	cfg       Config
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

// Stage resolves, verifies and pins what murmur.yaml declares (tools:, skills:, hooks:), copies the tools
// into the runtime directory's tools/<name>/, builds the hooks and, with capabilities.install, the
// installer pull-artifact and remove-artifact answer through.
func Stage(cfg Config) (*Set, error) {
	c := cfg.Capsule
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	sa := &Set{cfg: cfg, allow: &artifact.Allowlist{}, declared: map[string]*artifact.Artifact{}, digests: map[string]string{},
		everyTurn: c.IsAgent() && c.Inference.ToolRefresh == capsule.ToolRefreshEveryTurn}
	project := cfg.ProjectDir
	if project == "" {
		project = c.Dir
	}
	stores := artifact.Stores(project, cfg.Getenv, cfg.Getenv("HOME"))
	inst := c.Capabilities.Install
	granted := c.IsAgent() && c.Transport != capsule.TransportProcess && len(inst.Tool)+len(inst.Skill)+len(inst.From) > 0
	declared := artifact.Declared{Tools: c.Tools, Skills: c.Skills, Hooks: c.Hooks}
	if len(declared.Tools)+len(declared.Skills)+len(declared.Hooks) == 0 && !granted {
		return sa, nil
	}
	cacheDir := cfg.WasmCacheDir
	if cacheDir == "" && cfg.DataDir != "" {
		cacheDir = filepath.Join(cfg.DataDir, "wasm-cache")
	}
	runner, err := wasm.New(wasm.Config{CacheDir: cacheDir, Logger: cfg.Log})
	if err != nil {
		return nil, err
	}
	sa.runner = runner
	fail := func(err error) (*Set, error) {
		sa.Close()
		return nil, fmt.Errorf("member %s: %w", cfg.Member, err)
	}
	if err := sa.stage(stores, declared); err != nil {
		return fail(err)
	}
	if granted {
		if sa.installer, err = sa.newInstaller(stores, project, declared); err != nil {
			return fail(err)
		}
	}
	return sa, nil
}

// stage stages the declared artifacts: the tools copied, compiled and allowed, the skills read, and the
// hooks built.
func (sa *Set) stage(stores []artifact.Store, declared artifact.Declared) error {
	arts, err := artifact.StageDeclared(context.Background(), stores, artifact.LockPath(sa.cfg.Capsule.Dir), declared, true)
	if err != nil {
		return err
	}
	var hookList []hooks.Hook
	for _, a := range arts {
		switch a.Manifest.Runtime {
		case artifact.RuntimeTool:
			if err := sa.addTool(a); err != nil {
				return err
			}
		case artifact.RuntimeSkill:
			sk, err := artifact.ReadSkill(a, artifact.OriginOperator)
			if err != nil {
				return err
			}
			sa.skills = append(sa.skills, sk)
		case artifact.RuntimeHook:
			h, err := sa.hook(a)
			if err != nil {
				return err
			}
			hookList = append(hookList, h)
		}
	}
	sa.hooks, err = hooks.New(hooks.Config{Hooks: hookList, Recorder: sa.cfg.Recorder})
	return err
}

// addTool copies a declared tool into the runtime directory's tools/<name>/, compiles it, and puts it on
// the allowlist.
func (sa *Set) addTool(a *artifact.Artifact) error {
	m := a.Manifest
	placed, err := artifact.CopyTo(a, filepath.Join(sa.cfg.RuntimeDir, "tools", m.Name.Tool()))
	if err != nil {
		return err
	}
	if err := sa.compile(context.Background(), placed); err != nil {
		return fmt.Errorf("%s: %s@%s: %w", sa.cfg.Capsule.Path, m.Name, m.Version, err)
	}
	sa.declared[m.Name.Tool()] = placed
	return sa.allow.Add(m.Name)
}

// hook builds a declared hook: a WebAssembly one compiled, a command one run from a copy of its own.
func (sa *Set) hook(a *artifact.Artifact) (hooks.Hook, error) {
	m := a.Manifest
	h := hooks.Hook{Name: string(m.Name)}
	for _, e := range m.Events {
		h.Events = append(h.Events, string(e))
	}
	if m.Implementation == artifact.ImplWASM {
		if err := sa.compile(context.Background(), a); err != nil {
			return hooks.Hook{}, fmt.Errorf("%s: %s@%s: %w", sa.cfg.Capsule.Path, m.Name, m.Version, err)
		}
		h.Runner = sa.wasmHook(a)
		return h, nil
	}
	// The store may be inside the data directory (.murmur/ beside the roster), which no command may
	// read: the hook runs from a copy of its own.
	if sa.hookDir == "" {
		var err error
		if sa.hookDir, err = os.MkdirTemp("", "mur-hooks-"); err != nil {
			return hooks.Hook{}, err
		}
	}
	placed, err := artifact.CopyTo(a, filepath.Join(sa.hookDir, m.Name.Tool()))
	if err != nil {
		return hooks.Hook{}, err
	}
	h.Runner = sa.commandHook(placed)
	return h, nil
}

// newInstaller builds the installer of capabilities.install: its grant, and a finder over the stores
// and, when the grant names sources, project's sources fetched into the runtime directory.
func (sa *Set) newInstaller(stores []artifact.Store, project string, declared artifact.Declared) (*artifact.Installer, error) {
	c, cfg := sa.cfg.Capsule, sa.cfg
	inst := c.Capabilities.Install
	g, err := artifact.NewGrant(inst.Tool, inst.Skill, inst.From)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	finder := &artifact.Finder{Stores: stores}
	if g.Sources {
		srcs, err := artifact.ReadSources(artifact.SourcesPath(project))
		if err != nil {
			return nil, err
		}
		finder.Sources = srcs
		fetchDir := filepath.Join(cfg.RuntimeDir, "fetch")
		if err := os.MkdirAll(fetchDir, 0o700); err != nil {
			return nil, err
		}
		finder.Fetcher = &artifact.Fetcher{Base: artifact.GitHubBase(cfg.Getenv), Client: cfg.HTTPClient, TempDir: fetchDir}
	}
	return artifact.NewInstaller(artifact.InstallConfig{Grant: g, Finder: finder, LockPath: artifact.LockPath(c.Dir),
		ToolsDir: filepath.Join(cfg.RuntimeDir, "tools"), SkillsDir: filepath.Join(cfg.RuntimeDir, "skills"),
		Allowlist: sa.allow, Declared: declared.Names(),
		Check: func(ctx context.Context, a *artifact.Artifact) error { return sa.compile(ctx, a) }}), nil
}

// Close frees the compiled modules and the command hooks' copies.
func (sa *Set) Close() {
	if sa == nil {
		return
	}
	if sa.runner != nil {
		// The runner logs a call still blocked itself; what else it returns is wazero freeing memory.
		_ = sa.runner.Close()
	}
	if sa.hookDir != "" {
		if err := os.RemoveAll(sa.hookDir); err != nil {
			sa.cfg.Log.Warn("the command hooks' directory is left behind", "dir", sa.hookDir, "err", err)
		}
	}
}

// Installer is what pull-artifact and remove-artifact answer through; nil without capabilities.install.
func (sa *Set) Installer() *artifact.Installer {
	if sa == nil {
		return nil
	}
	return sa.installer
}

// Holds reports whether a tool artifact holds the tool name (the allowlist).
func (sa *Set) Holds(name string) bool { return sa != nil && sa.allow.Contains(name) }

// modulePath is the module file of a WebAssembly artifact.
func modulePath(a *artifact.Artifact) string {
	return filepath.Join(a.Dir, filepath.FromSlash(a.Manifest.Module))
}

// moduleDigest returns the digest of a's module, hashing it once per path.
func (sa *Set) moduleDigest(a *artifact.Artifact) (string, error) {
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

// compile compiles a's module ahead of its first call, refusing a module that cannot run, and one whose
// imports of the host module its role and WIT level do not allow (artifact.Manifest.CheckHostImports).
func (sa *Set) compile(ctx context.Context, a *artifact.Artifact) error {
	d, err := sa.moduleDigest(a)
	if err != nil {
		return err
	}
	call := wasm.Call{Name: a.Manifest.Name.Tool(), Path: modulePath(a), Digest: d}
	if err := sa.runner.Compile(ctx, call); err != nil {
		return err
	}
	imports, err := sa.runner.HostImports(ctx, call)
	if err != nil {
		return err
	}
	if err := a.Manifest.CheckHostImports(imports); err != nil {
		return err
	}
	if a.Manifest.Runtime == artifact.RuntimeHook && slices.Contains(imports, wit.FnRunInference) && !sa.cfg.Capsule.Capabilities.Hooks.Inference {
		sa.cfg.Log.Warn("a hook imports run_inference, but capabilities.hooks.inference is not true: its calls are refused (W-HOOK-001)",
			"hook", string(a.Manifest.Name))
	}
	return nil
}

// Tool returns the tool artifact the model calls name, declared or pulled, when it is on the allowlist.
func (sa *Set) Tool(name string) (*artifact.Artifact, bool) {
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

// Tools returns every tool artifact of the session, sorted by tool name.
func (sa *Set) Tools() []*artifact.Artifact {
	if sa == nil {
		return nil
	}
	var out []*artifact.Artifact
	for _, name := range sa.allow.Names() {
		if a, ok := sa.Tool(name); ok {
			out = append(out, a)
		}
	}
	return out
}

// Skills returns the operator's skills, then the agent's.
func (sa *Set) Skills() []artifact.Skill {
	if sa == nil {
		return nil
	}
	out := slices.Clone(sa.skills)
	if sa.installer != nil {
		out = append(out, sa.installer.Skills()...)
	}
	return out
}

// Changes returns what pulls and removals changed since the last call.
func (sa *Set) Changes() (added, removed []string) {
	if sa == nil || sa.installer == nil {
		return nil, nil
	}
	return sa.installer.Changes()
}

// EveryTurn reports whether the tool array is re-read before every inference call
// (inference.tool_refresh: every_turn).
func (sa *Set) EveryTurn() bool { return sa != nil && sa.everyTurn }

// Removed reports whether remove-artifact took the tool name out of this session.
func (sa *Set) Removed(name string) bool {
	if sa == nil || sa.installer == nil {
		return false
	}
	_, ok := sa.installer.Removed(name)
	return ok
}
