package setup

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/member/artifact/staged"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/member/share"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// Config is what Build is given: the session's settings, as plain values and callbacks.
type Config struct {
	Capsule        *capsule.Capsule
	Store          store.Tasks
	Member         string
	Formation      string
	Session        string // the session's ses_ id
	RecordsRoot    string
	DataDir        string
	WorkDir        string // the session's workdir, created when missing; "" for none
	Workdir        string // where commands run: WorkDir, or the capsule directory without one
	RuntimeRoot    string
	WasmCacheDir   string
	ProjectDir     string
	ConfineHelper  string
	FormationToken string
	Roster         *roster.Roster
	// Peers overrides how peers' doors are reached; nil means over HTTP with this member's credential
	// (calls.DoorPeers).
	Peers      calls.Peers
	HTTPClient *http.Client
	Getenv     func(string) string
	Now        func() time.Time
	Log        *slog.Logger
	// Isolate finds what the host allows around commands; nil probes it (sandbox.Probe).
	Isolate func() sandbox.Isolation
	// Recovered is told of each task the store ended failed because it was running when the member
	// last stopped.
	Recovered func(id a2a.TaskID)
	// Moved and Ended are the background commands' callbacks (sandbox.CommandsConfig).
	Moved func()
	Ended func(sandbox.Ended)
	// Secrets are kept out of every program's environment besides FormationToken (sandbox.DropSecrets).
	Secrets []sandbox.Secret
	// ToolHost and HookHost answer what a WIT level 2 artifact asks of the session (staged.Config).
	ToolHost func(task string, inPlan bool) wit.Functions
	HookHost func(task, hook string) wit.Functions
	// PeerFileKeeper, on a member's replicas, keeps the files share-file shares in the store they share
	// (share.Config.Keeper); nil for a member of one process.
	PeerFileKeeper share.PeerFileKeeper
}

// Parts is what Build made.
type Parts struct {
	Drivers map[string]driver.Driver // an agent capsule's, under transport: http; nil otherwise
	Iso     sandbox.Isolation        // what this host puts around commands; zero when none run
	// HostIsolation is what this host puts around commands, for a sub-session: Iso when the session
	// runs commands, else one probe made at the first call.
	HostIsolation func() sandbox.Isolation
	Confined      bool // commands run under their Landlock rules
	Runner        *sandbox.Runner
	Commands      *sandbox.Commands
	Records       *records.Writer
	Recovered     []a2a.TaskID
	RuntimeDir    string // the session's runtime directory (tool manifests)
	Art           *staged.Set
	Files         *share.Files
	Spawn         []delegate.Entry // capabilities.spawn.allow, resolved
	Peers         calls.Peers      // the peers' doors; nil for a session in no formation

	member    string
	manifests bool // Tools writes the tools' manifests into RuntimeDir: the session has a runtime root
	// runtimeRoot and session name the runtime directory Close removes; runtimeRoot is "" without one.
	runtimeRoot, session string
}

// Build makes a session's parts. On an error nothing it opened stays open.
func Build(cfg Config) (*Parts, error) {
	c := cfg.Capsule
	p := &Parts{Confined: sandbox.Confines(c.Capabilities.Shell.Confine, cfg.ConfineHelper), Peers: cfg.Peers,
		member: cfg.Member, manifests: cfg.RuntimeRoot != "", runtimeRoot: cfg.RuntimeRoot, session: cfg.Session}
	formation := "" // this member's peer credentials are derived with the formation's secret and name
	if cfg.Roster != nil {
		formation = cfg.Roster.Formation
	}
	key := peercred.NewKey(cfg.FormationToken, formation)
	if p.Peers == nil && cfg.Roster != nil {
		p.Peers = calls.DoorPeers(cfg.Roster, cfg.Member, key, cfg.HTTPClient)
	}
	if c.IsAgent() && c.Harness == nil {
		drivers, err := driver.Build(c, cfg.HTTPClient, cfg.Getenv)
		if err != nil {
			return nil, err
		}
		p.Drivers = drivers
	}
	if cfg.Isolate == nil {
		cfg.Isolate = sandbox.Probe
	}
	p.HostIsolation = sync.OnceValue(cfg.Isolate)
	if c.RunsCommands() {
		p.Iso = p.HostIsolation()
	}
	p.Runner = sandbox.NewRunner(sandbox.RunnerConfig{Capsule: c, Isolation: p.Iso, Landlock: p.Confined,
		ConfineHelper: cfg.ConfineHelper, Workdir: cfg.Workdir, DataDir: cfg.DataDir, RecordsRoot: cfg.RecordsRoot,
		Member: cfg.Member, Formation: cfg.Formation, Session: cfg.Session, Secrets: secrets(cfg), Log: cfg.Log})
	if c.RunsCommands() {
		p.Runner.WarnSecretReads()
	}
	if cfg.WorkDir != "" {
		if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
			return nil, fmt.Errorf("member %s: workdir: %w", cfg.Member, err)
		}
	}
	recovered, err := cfg.Store.Recover(context.Background(), cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("member %s: recovering the task store: %w", cfg.Member, err)
	}
	for _, id := range recovered {
		cfg.Recovered(id)
	}
	p.Recovered = recovered
	rec, err := records.Open(filepath.Join(cfg.RecordsRoot, cfg.Session), cfg.Session, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", cfg.Member, err)
	}
	p.Records = rec
	p.RuntimeDir = filepath.Join(rec.Dir(), "runtime")
	if cfg.RuntimeRoot != "" {
		p.RuntimeDir = filepath.Join(cfg.RuntimeRoot, cfg.Session)
	}
	p.Commands = sandbox.NewCommands(sandbox.CommandsConfig{Runner: p.Runner, Grants: c.Capabilities.Shell,
		GraceSecs: c.Lifecycle.ShellGraceSecs, LogDir: filepath.Join(rec.Dir(), "logs"), Moved: cfg.Moved, Ended: cfg.Ended})
	p.Art, err = staged.Stage(staged.Config{Capsule: c, Member: cfg.Member, Session: cfg.Session, ProjectDir: cfg.ProjectDir,
		DataDir: cfg.DataDir, WasmCacheDir: cfg.WasmCacheDir, RuntimeDir: p.RuntimeDir, Getenv: cfg.Getenv,
		HTTPClient: cfg.HTTPClient, Recorder: rec, Runner: p.Runner, Workdir: cfg.WorkDir, OutputLimit: p.Commands.OutputLimit(), Log: cfg.Log,
		ToolHost: cfg.ToolHost, HookHost: cfg.HookHost})
	if err != nil {
		// Already failing: Stage's error is the one to report.
		_ = rec.Close()
		_ = RemoveRuntimeDir(cfg.RuntimeRoot, cfg.Session) // what Stage copied before it failed; else the next start
		return nil, err
	}
	p.Files = share.New(share.Config{Capsule: c, Roster: cfg.Roster, Member: cfg.Member,
		FormationToken: cfg.FormationToken, CredKey: key, HTTPClient: cfg.HTTPClient, Now: cfg.Now,
		Log: cfg.Log, Workdir: cfg.Workdir, Keeper: cfg.PeerFileKeeper})
	if p.Spawn, err = delegate.ResolveFor(c, cfg.Member, cfg.ProjectDir, cfg.Getenv); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// secrets are what the session's runner keeps out of every program's environment: cfg.Secrets and the
// formation token.
func secrets(cfg Config) []sandbox.Secret {
	out := slices.Clone(cfg.Secrets)
	if cfg.FormationToken != "" {
		out = append(out, sandbox.Secret{What: "the formation token", Value: cfg.FormationToken})
	}
	return out
}

// Close closes what Build opened, for a Start that fails after it: the staged artifacts, the records,
// and removes the session's runtime directory (what it leaves, the member's next start removes).
func (p *Parts) Close() {
	p.Art.Close()
	// Start is already failing: its error is the one to report.
	_ = p.Records.Close()
	_ = RemoveRuntimeDir(p.runtimeRoot, p.session)
}

// Deadline is a session's deadline: start plus the capsule's own (zero: none), or the deadline it
// inherits from the session that delegated to it when that is earlier.
func Deadline(start time.Time, own time.Duration, inherited time.Time) time.Time {
	var d time.Time
	if own > 0 {
		d = start.Add(own)
	}
	if !inherited.IsZero() && (d.IsZero() || inherited.Before(d)) {
		d = inherited // the parent's effective deadline is earlier
	}
	return d
}

// Start is what the session_start record says.
type Start struct {
	Member, Formation, Capsule string
	Tools                      []string // every tool the model may call
	Deadline                   time.Time
	Driver                     string // the driver choice; "" for none
	// Harness and ToolServer are a session's under transport: process; nil and "" under http.
	Harness    *capsule.Harness
	ToolServer string
	// Sub marks a sub-session, which names its parent session, its delegation and its depth.
	Sub                bool
	Parent, Delegation string
	Depth              int
	Recovered          []a2a.TaskID
}

// Fields are the session_start record's fields.
func (s Start) Fields() map[string]any {
	f := map[string]any{"member": s.Member, "formation": s.Formation, "capsule": s.Capsule, "tools_declared": s.Tools}
	if !s.Deadline.IsZero() {
		f["deadline"] = s.Deadline.UTC().Format(time.RFC3339)
	}
	if s.Driver != "" {
		f["driver"] = s.Driver
	}
	if s.Harness != nil {
		f["transport"] = capsule.TransportProcess
		f["harness"] = map[string]any{"command": s.Harness.Command[0], "dialect": s.Harness.Dialect}
		f["tool_server"] = s.ToolServer
	}
	if s.Sub {
		f["parent"], f["delegation"], f["depth"] = s.Parent, s.Delegation, s.Depth
	}
	if len(s.Recovered) > 0 {
		f["recovered_tasks"] = s.Recovered
	}
	return f
}
