package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/admit"
	"github.com/murmur-run/murmur/member/artifact/staged"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/control"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/end"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/hostcall"
	"github.com/murmur-run/murmur/member/lifecycle"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/queue"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/replica"
	"github.com/murmur-run/murmur/member/retry"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/member/setup"
	"github.com/murmur-run/murmur/member/share"
	"github.com/murmur-run/murmur/member/spans"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

// The trust classes and origins a task carries (DESIGN §2, §5): those of ids, which every package that
// reads metadata.murmur shares.
const (
	TrustTrusted   = ids.TrustTrusted
	TrustUntrusted = ids.TrustUntrusted

	OriginOperator   = ids.OriginOperator
	OriginPeer       = ids.OriginPeer
	OriginCompletion = ids.OriginCompletion
)

// The status texts a session gives tasks it does not run to an answer.
const (
	BusyMessage          = runtimetools.BusyRefusal
	ShutdownReject       = "task rejected: the member is shutting down"
	CanceledMessage      = end.CanceledText
	CanceledCallsRunning = end.CanceledCallsRunningText // for a task that had member calls outstanding
	ShutdownCancel       = end.ShutdownText
	DeadlineReject       = "task rejected: the session ended at its deadline, %s"
	DeadlineFail         = end.DeadlineText
)

// Origin says who sent a task and with which trust class.
type Origin struct {
	Trust        ids.Trust  // TrustTrusted or TrustUntrusted
	Origin       ids.Origin // OriginOperator, OriginPeer, OriginCompletion or OriginDelegation
	Caller       string     // the calling member, for OriginPeer
	CallID       string
	CallerTaskID string
	// Stored, when set, is called with a new task once it is stored and before the executor may start
	// it: the door registers there the push config the message carried, so the webhook's first post is
	// the task's SUBMITTED, and no change of a fast task comes and goes before the config exists. An
	// error is returned by Send with the task, which runs all the same. Not called for a follow-up.
	Stored func(*a2a.Task) error
	// Streamed says the sender streams the task from its creation on: it does not start before its
	// creation is durable and Send has answered, so that the stream opens with it SUBMITTED. Any other
	// new task may start as soon as its creation is handed to the store (createEarly).
	Streamed bool
	// Retried, when set, is called when Send answers a message this caller already sent with the task
	// that message created (see Send): the door then registers no push config a second time.
	Retried func(*a2a.Task)
}

// Config is everything a session is given; nothing is read from package state.
type Config struct {
	Member    string // the member's name in its roster
	Formation string
	Capsule   *capsule.Capsule
	Store     store.Tasks
	// RecordsRoot is the project's records directory; the session's records go in RecordsRoot/<session id>.
	RecordsRoot string
	// DataDir is the formation's data directory (tokens, task stores); "" when there is none. Commands
	// never read it, nor RecordsRoot, except their own workdir.
	DataDir string
	// WorkDir is the session's working directory; created when missing.
	WorkDir string
	// RuntimeRoot holds the sessions' runtime directories: RuntimeRoot/<session id>/tools/<name>/murmur.yaml.
	RuntimeRoot string
	// WasmCacheDir keeps compiled WebAssembly modules across sessions and processes; "" means
	// DataDir/wasm-cache (none without a data directory).
	WasmCacheDir string
	// ProjectDir is where the project store is (.murmur/store/ in it): the roster's directory; "" means
	// the capsule's.
	ProjectDir string
	Metrics    *metrics.Series
	Logger     *slog.Logger
	Now        func() time.Time
	// Getenv resolves env: credentials; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient is what model drivers and peer calls use; nil means a default client.
	HTTPClient *http.Client
	// Roster is the formation this member belongs to; nil for a session in no formation.
	Roster *roster.Roster
	// FormationToken is the formation's secret. The member signs peer-file handles with keys derived from
	// it and presents a credential derived from it and its name to peers' doors (package peercred); the
	// secret itself is never sent, and never reaches a model or a command.
	FormationToken string
	// Secrets are the formation's other secrets (the operator token, the control tokens): like the
	// formation token, they are dropped from the environment of every program the session starts, and a
	// harness.env entry carrying one is left out and named in the log and the harness_run record.
	Secrets []sandbox.Secret
	// Peers overrides how peers' doors are reached (tests); nil means over HTTP with this member's
	// credential.
	Peers calls.Peers
	// ConfineHelper is an executable that runs `ConfineCommand path name args…` (mur itself); every
	// command (shell binaries, a script capsule's command, done_check) runs through it to get its memory
	// limit and its Landlock rules. "" runs them directly.
	ConfineHelper string
	// Events is told of every stored task change and of the agent loop's progress (the door's streams,
	// push notifications); nil tells nobody.
	Events events.Publisher
	// StartToolServer starts the loopback tool server of a session under transport: process
	// (server.StartToolServer); a process capsule cannot start without it.
	StartToolServer func(harness.ToolSet) (harness.ToolServer, error)
	// DoorURL is the member's door, the base of the URLs of artifacts too large to carry inline.
	DoorURL string
	// ArtifactsDir keeps those artifacts' files, by task; "" means the session's records directory.
	ArtifactsDir string
	// Sub is set for a sub-session that delegate-task started (member/delegate); nil for a member.
	Sub *SubSession
	// Replicas is the member's other replicas (DESIGN §16): the replica.Coordinator; nil for a member of
	// one process.
	Replicas replica.Peers
	// TracerProvider is what the session's spans start on (DESIGN §17); nil means the global provider.
	TracerProvider trace.TracerProvider
	// Isolate finds what the host allows around commands; nil probes it (sandbox.Probe). The members
	// of a formation share one probe; tests set it to take one mechanism away.
	Isolate func() sandbox.Isolation
}

// Session runs one capsule: it takes tasks through Send, runs them one at a time in submission order,
// and keeps every state change in the store before it reports it.
//
// All methods are safe for concurrent use. Close ends the session: queued tasks end canceled, the running
// one is canceled and awaited.
type Session struct {
	// Set once, in Start, before the executor's goroutines start, and never changed: read without a lock.
	cfg      Config
	id       string
	started  time.Time
	deadline time.Time // zero: none
	log      *slog.Logger
	drivers  map[string]driver.Driver
	files    *share.Files      // share-file and fetch-peer-file
	runner   *sandbox.Runner   // starts every command, confined
	commands *sandbox.Commands // shell calls and background commands
	tools    *runtimetools.Registry
	hosts    *hostcall.Config // what a WIT level 2 artifact may ask
	rules    *lifecycle.Rules // keep_working, done_check, the deadline notice
	spawn    []delegate.Entry // capabilities.spawn.allow, resolved
	peers    calls.Peers
	hostIso  func() sandbox.Isolation // what this host puts around commands, for sub-sessions
	proc     *harness.Transport       // transport: process; nil under http
	talk     converse.Config          // the session as member/converse sees it: its conversations (§15)
	side     *replica.Side            // what the session does on a member's replicas (DESIGN §16)
	timer    *time.Timer              // the deadline's; nil without one
	base     context.Context          // every task's context derives from it; Close ends it
	stopAll  context.CancelFunc

	// Set once too, each safe for concurrent use by its own lock (or atomics): used with mu held or not.
	admit   *admit.Gate      // whether a new task enters; a rejection never waits for mu or the disk
	retries *retry.Book      // a message sent again is answered with its task
	choice  *control.Choice  // the driver choice of the next inference call
	meter   *meter.Meter     // what session-status reports
	art     *staged.Set      // declared and pulled artifacts, hooks
	records *records.Writer  // trace.jsonl
	waiter  *converse.Waiter // the running task's question to its sender, while it waits
	waiters events.Signals   // wakes a task's Waits when it changes
	holder  events.Holder    // what those Waits ask of the session (WaitJSON)
	trc     *spans.Tracing   // its tracer, and the trace context each task carries to its run
	// storing counts the Sends between admission and the end of their Create; Close waits for them. A
	// Send adds itself holding mu while the session is open, so the Wait of Close, which closes it under
	// mu, misses none.
	storing sync.WaitGroup

	// The executor's channels, made once in Start.
	kick    chan struct{} // wakes the executor's loop; capacity 1
	ends    chan *ending  // execute hands each end to settle, in order
	settled chan struct{} // closed when settle returns
	done    chan struct{} // closed when the loop has returned and settle with it

	// mu guards the fields below it: the state of the session's tasks (tasks, and the fields of the
	// queue.Runs it holds) and the session's own (closed, expired, lastExit, endAtDeadline). It also
	// orders the changes of the tasks: one is stored, recorded and told to the task's waiters and
	// streams with mu held (the …Locked methods), so none interleaves with another. Send's Create, a
	// rejection and a task's run hold no lock.
	mu            sync.Mutex
	tasks         *queue.Tasks
	closed        bool
	expired       bool           // the deadline has passed: the session has ended
	lastExit      string         // the exit_status of the latest task that decides session_end's; "" before one
	endAtDeadline map[string]any // the session_end the deadline writes once the task it stopped has ended
}

// Start stages nothing new on disk beyond the records directory: it recovers the store (tasks that were
// running when the member last stopped end failed), opens the records, and starts the executor.
func Start(cfg Config) (*Session, error) {
	if cfg.Capsule == nil || cfg.Store == nil {
		return nil, errors.New("member: a session needs a capsule and a store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Metrics == nil {
		return nil, errors.New("member: a session needs its metrics")
	}
	s := blankSession(cfg)
	parts, err := setup.Build(setup.Config{Capsule: cfg.Capsule, Store: cfg.Store, Member: cfg.Member, Formation: cfg.Formation,
		Session: s.id, RecordsRoot: cfg.RecordsRoot, DataDir: cfg.DataDir, WorkDir: cfg.WorkDir, Workdir: s.workdir(),
		RuntimeRoot: cfg.RuntimeRoot, WasmCacheDir: cfg.WasmCacheDir, ProjectDir: cfg.ProjectDir, ConfineHelper: cfg.ConfineHelper,
		FormationToken: cfg.FormationToken, Secrets: cfg.Secrets, Roster: cfg.Roster, Peers: cfg.Peers, HTTPClient: cfg.HTTPClient,
		Getenv: cfg.Getenv, Now: cfg.Now, Log: s.log, Isolate: cfg.Isolate,
		Recovered: func(id a2a.TaskID) {
			s.log.Warn("task was running when the member stopped; marked failed", "task", id)
			cfg.Metrics.TasksTotal.WithLabelValues(string(a2a.TaskStateFailed)).Inc()
		},
		Moved: func() { cfg.Metrics.BackgroundCommands.WithLabelValues("running").Inc() }, Ended: s.backgroundEnded,
		ToolHost: s.hosts.Tool, HookHost: s.hosts.Hook, PeerFileKeeper: s.side.PeerFiles()})
	if err != nil {
		return nil, err
	}
	s.drivers, s.hostIso, s.runner, s.commands, s.records = parts.Drivers, parts.HostIsolation, parts.Runner, parts.Commands, parts.Records
	s.art, s.files, s.spawn, s.peers = parts.Art, parts.Files, parts.Spawn, parts.Peers
	artifacts := cfg.ArtifactsDir // where files too large to carry inline are kept
	if artifacts == "" {
		artifacts = filepath.Join(s.records.Dir(), "artifacts")
	}
	s.talk = s.side.Converse(converse.Config{Member: cfg.Member, DoorURL: cfg.DoorURL, Get: s.get, List: store.ListAll(cfg.Store),
		Caller: store.TaskCaller, Record: s.records.Write, Waiter: s.waiter, Workdir: s.workdir(), ArtifactsRoot: artifacts})
	s.choice = control.ChoiceFor(cfg.Capsule, s.drivers, cfg.Getenv)
	s.meter = meter.New(meter.Config{Capsule: cfg.Capsule, Now: cfg.Now, Started: s.started, Record: s.records.Write,
		Calls: cfg.Metrics.InferenceCalls, Tokens: cfg.Metrics.InferenceTokens})
	pulls := cfg.Metrics.ArtifactPulls
	if s.tools, err = parts.Tools(cfg.Capsule, s, s.choice, len(s.Callable()) > 0, func(rt, result string) { pulls.WithLabelValues(rt, result).Inc() }); err != nil {
		parts.Close()
		return nil, err
	}
	*s.hosts = hostcall.New(cfg.Capsule, s.drivers, s.choice, s.meter, s.records.Write, s.tools)
	if cfg.Capsule.Harness != nil {
		if err := s.startProcess(parts.Confined); err != nil {
			parts.Close()
			return nil, err
		}
	}
	start := setup.Start{Member: cfg.Member, Formation: cfg.Formation, Capsule: cfg.Capsule.Name, Tools: s.inventory(),
		Driver: s.choice.Current(), Recovered: parts.Recovered}
	var inherited time.Time
	if sub := cfg.Sub; sub != nil {
		inherited = sub.Deadline
		start.Sub, start.Parent, start.Delegation, start.Depth = true, sub.Parent, sub.Delegation, sub.Depth
	}
	s.deadline = setup.Deadline(s.started, cfg.Capsule.Deadline, inherited)
	s.rules = lifecycle.New(lifecycle.Config{Capsule: cfg.Capsule, Deadline: s.deadline, Now: cfg.Now, Meter: s.meter,
		RunCheck: s.runner.RunCheck, Record: s.records.Write})
	if s.proc != nil {
		start.Harness, start.ToolServer = cfg.Capsule.Harness, s.proc.URL()
	}
	start.Deadline = s.deadline
	if err := s.records.Write(records.TypeSessionStart, "", start.Fields()); err != nil {
		_ = s.proc.Close(context.Background()) // already failing: the record's error is the one to report
		parts.Close()
		return nil, err
	}
	s.base, s.stopAll = context.WithCancel(context.Background())
	if !s.deadline.IsZero() {
		s.timer = time.AfterFunc(s.deadline.Sub(cfg.Now()), s.expire)
	}
	go s.settle()
	go s.loop()
	return s, nil
}

// blankSession is the session of cfg before Start builds its parts: its state, its gate, its channels and
// its side of the member's replicas.
func blankSession(cfg Config) *Session {
	s := &Session{
		cfg:     cfg,
		id:      ids.New(ids.PrefixSession),
		started: cfg.Now(),
		log:     cfg.Logger.With("member", cfg.Member),
		tasks:   queue.New(),
		retries: &retry.Book{Lookup: cfg.Store.GetByMessage},
		hosts:   &hostcall.Config{},
		admit:   admit.New(cfg.Capsule, BusyMessage),
		kick:    make(chan struct{}, 1),
		ends:    make(chan *ending, maxEnding),
		settled: make(chan struct{}),
		done:    make(chan struct{}),
		waiter:  converse.NewWaiter(),
		trc:     spans.New(cfg.TracerProvider),
	}
	s.holder = events.Holder{Read: s.readTask, Unsettled: s.unsettledHere, Elsewhere: s.goneElsewhere, Settled: s.awaitSettled}
	s.side = replica.NewSide(replica.SideConfig{Peers: cfg.Replicas, Store: cfg.Store, Gate: s.admit, Waiter: s.waiter,
		Waits: &s.waiters, Events: cfg.Events, Log: s.log, Idle: s.idle, Queue: s.adopt, Changed: s.changed, Cancel: s.Cancel})
	return s
}

// ExportRoot is the directory exports.peer_files names, below the workdir; zero when the capsule exports
// nothing. The door serves peer files from it.
func (s *Session) ExportRoot() peerfile.Root { return s.files.ExportRoot() }

// PeerFiles is the session's share-file and fetch-peer-file.
func (s *Session) PeerFiles() *share.Files { return s.files }

// RecordRefusal writes a peer_refused record: a peer's request the door refused because what the
// request claimed (its caller or trust class) did not match its credential.
func (s *Session) RecordRefusal(fields map[string]any) {
	if err := s.records.Write(records.TypePeerRefused, "", fields); err != nil {
		s.log.Warn("writing a peer_refused record", "err", err)
	}
}

// ID returns the session id (ses_…).
func (s *Session) ID() string { return s.id }

// RecordsDir returns the session's records directory.
func (s *Session) RecordsDir() string { return s.records.Dir() }

// Capsule returns the capsule the session runs.
func (s *Session) Capsule() *capsule.Capsule { return s.cfg.Capsule }

// Ping reports whether the session can take work: not closed, store answering.
func (s *Session) Ping(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("session closed")
	}
	return s.cfg.Store.Ping(ctx)
}

// Get returns a stored task in scope with at most historyLength of its most recent messages (nil: all;
// 0: none).
func (s *Session) Get(ctx context.Context, id a2a.TaskID, historyLength *int, scope store.Scope) (*a2a.Task, error) {
	t, err := s.get(ctx, id, scope)
	if err != nil {
		return nil, err
	}
	t.TrimHistory(historyLength)
	return t, nil
}

// GetJSON returns a stored task in scope, whole, as its JSON: the door's GetTask without historyLength,
// which needs no decode. The caller must not modify the bytes.
func (s *Session) GetJSON(ctx context.Context, id a2a.TaskID, scope store.Scope) ([]byte, error) {
	return s.cfg.Store.GetInScope(ctx, id, scope)
}

// get returns a stored task in scope; a task outside it is not found.
func (s *Session) get(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error) {
	body, err := s.GetJSON(ctx, id, scope)
	if err != nil {
		return nil, err
	}
	return store.Decode(id, body)
}

// List returns one page of the tasks in scope.
func (s *Session) List(ctx context.Context, q store.ListQuery, scope store.Scope) (store.ListPage, error) {
	return s.cfg.Store.ListInScope(ctx, q, scope)
}

// Cancel cancels a task in scope: a queued one at once, a running one by canceling its work and waiting
// for it to stop. Canceling a canceled task returns it unchanged; canceling another terminal task is
// a2a.ErrTaskNotCancelable; a task outside the scope is not found.
func (s *Session) Cancel(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error) {
	if _, err := s.GetJSON(ctx, id, scope); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.tasks.Dequeue(id) {
		t, err := s.cfg.Store.Get(ctx, id)
		if err == nil {
			err = s.finishLocked(ctx, s.endOf(a2a.TaskStateCanceled, CanceledMessage, nil), t)
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	if r := s.tasks.Cancel(id); r != nil { // running, or its end is on its way to the disk
		done := r.Done
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		t, err := s.cfg.Store.Get(ctx, id)
		if err == nil && t.Status.State.Terminal() && t.Status.State != a2a.TaskStateCanceled {
			// Its end was on its way to the disk already.
			return nil, notCancelable(t)
		}
		return t, err
	}
	s.mu.Unlock()
	t, err := s.cfg.Store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case t.Status.State == a2a.TaskStateCanceled:
		return t, nil
	case t.Status.State.Terminal():
		return nil, notCancelable(t)
	}
	if t, done, err := s.side.CancelElsewhere(ctx, id); done || err != nil { // another replica's, or nobody's
		return t, err
	}
	// Not queued, not running, not terminal: the worker is just taking it (or another replica runs it,
	// asked to stop). Ask again once it has.
	if t, err = s.Wait(ctx, id); err == nil && t.Status.State.Terminal() && t.Status.State != a2a.TaskStateCanceled {
		return nil, notCancelable(t)
	}
	return t, err
}

// Close ends the session: no new task is taken, queued tasks end canceled, the running task is canceled
// and awaited (or recorded as interrupted if ctx ends first), its runtime directory is removed, and
// session_end is written.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.admit.Refuse(ShutdownReject)
	expired := s.expired
	if s.timer != nil {
		s.timer.Stop()
	}
	var errs []error
	errs = append(errs, s.releaseQueuedLocked(ctx))
	errs = append(errs, s.endQueuedLocked(ctx, a2a.TaskStateCanceled, ShutdownCancel))
	s.tasks.Clear()
	s.mu.Unlock()
	s.storing.Wait()
	s.stopAll()
	s.commands.KillAll()
	select {
	case <-s.done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("member %s: the running task did not stop in time; the store marks it failed at the next start", s.cfg.Member))
	}
	s.art.Close()
	errs = append(errs, s.proc.Close(ctx))
	// Its runtime directory goes with it; sub-sessions sharing the runtime root remove their own.
	errs = append(errs, setup.RemoveRuntimeDir(s.cfg.RuntimeRoot, s.id))
	if !expired {
		s.mu.Lock()
		exit := s.exitStatusLocked()
		s.mu.Unlock()
		errs = append(errs, s.records.Write(records.TypeSessionEnd, "", map[string]any{
			"reason": "closed", "exit_status": exit, "elapsed_secs": int64(s.cfg.Now().Sub(s.started) / time.Second),
		}))
	}
	errs = append(errs, s.records.Close())
	return errors.Join(errs...)
}

// queuedLocked reads the queued tasks that are stored, in one go; a task whose Send has not stored it yet
// is left to that Send, which ends it once it is stored. A task it cannot read stays submitted in the
// store, which the next start ends failed. s.mu is held.
func (s *Session) queuedLocked(ctx context.Context) ([]*a2a.Task, error) {
	return s.cfg.Store.GetAll(ctx, s.tasks.Queued())
}

// expire ends the session at its deadline: no new task is taken, queued tasks and the running one fail
// saying so, and session_end is written. The door stays up to answer for the tasks it holds.
func (s *Session) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.expired {
		return
	}
	s.expired = true
	at := s.deadline.UTC().Format(time.RFC3339)
	s.admit.Refuse(fmt.Sprintf(DeadlineReject, at))
	ctx := context.Background()
	if err := s.endQueuedLocked(ctx, a2a.TaskStateFailed, fmt.Sprintf(DeadlineFail, at)); err != nil {
		s.log.Error("storing the ends of the queued tasks at the deadline", "err", err)
	}
	s.tasks.Clear()
	s.endAtDeadline = map[string]any{"reason": "deadline", "deadline": at}
	if r := s.tasks.Running(); r != nil {
		// The running task's end decides the exit status: session_end follows it (settle).
		r.Cancel(end.ErrDeadline)
		return
	}
	if s.tasks.Quiet() {
		s.writeDeadlineEndLocked() // else settle writes it after the last end
	}
}

// writeDeadlineEndLocked writes the session_end of a session that reached its deadline, once no task
// runs. s.mu is held.
func (s *Session) writeDeadlineEndLocked() {
	if s.endAtDeadline == nil {
		return
	}
	fields := s.endAtDeadline
	s.endAtDeadline = nil
	fields["exit_status"] = s.exitStatusLocked()
	fields["elapsed_secs"] = int64(s.cfg.Now().Sub(s.started) / time.Second)
	if err := s.records.Write(records.TypeSessionEnd, "", fields); err != nil {
		s.log.Warn("writing the session_end record", "err", err)
	}
}

// exitStatusLocked is session_end's exit_status: the exit_status of the latest task that ended
// completed, failed or canceled, "none" when no task has. A task that ended without an answer never
// decides it (SPEC), nor does a rejected one, which never ran. s.mu is held.
func (s *Session) exitStatusLocked() string {
	if s.lastExit == "" {
		return "none"
	}
	return s.lastExit
}
