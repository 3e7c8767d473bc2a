package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/push"
	"github.com/murmur-run/murmur/member/push/pgpush"
	"github.com/murmur-run/murmur/member/replica"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/member/setup"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/postgres"
	"github.com/murmur-run/murmur/roster"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// FormationConfig says which members of a roster to start and where their state goes.
type FormationConfig struct {
	Roster *roster.Roster
	// Capsules are capsules already loaded, by the roster's capsule directory (mur run's staging loaded
	// them: stage.FormationCapsules); the members that run one start on it, and the others' capsules are
	// loaded at their start.
	Capsules map[string]*capsule.Capsule
	// Only names the members to start; empty starts every member (mur run). mur member starts one.
	Only []string
	// DataDir is the formation's data directory: tokens at its top, each member's state under
	// members/<name>/ (the task store, the workdir, the runtime directory).
	DataDir string
	// RecordsRoot is where session records go: RecordsRoot/<session id>/.
	RecordsRoot string
	Tokens      Tokens
	// Listen, when set, overrides the listen address of the (single) member started (MUR_LISTEN).
	Listen  string
	MaxBody int64
	// MaxStreams is how many streams one caller may hold open on each door; 0: DefaultMaxStreams.
	MaxStreams int
	// ConfineHelper is the executable shell binaries run through (mur itself); "" runs them unconfined.
	ConfineHelper string
	Version       string
	Logger        *slog.Logger
	Now           func() time.Time
	// ControlToken is MUR_CONTROL_TOKEN: a control token every started member's control surface takes.
	ControlToken string
	// PushBackoff is the wait after a first failed push delivery (doubling after each further one); 0:
	// push.DefaultBackoff.
	PushBackoff time.Duration
	// Store is MUR_STORE: the task store of every member whose roster entry names none ("": the embedded
	// SQLite file), its password PostgreSQL's own (PGPASSWORD, ~/.pgpass); see openStore.
	Store string
	// Getenv resolves a store_password of env:NAME; nil means os.Getenv.
	Getenv func(string) string
	// Replica is MUR_REPLICA: the name of this process's replica of the member it runs (DESIGN §16); ""
	// means the host's name for a member with replicas above 1 (and one process otherwise).
	Replica string
	// Lease is a replica's lease (MUR_LEASE); 0 means replica.DefaultLease.
	Lease time.Duration
	// TracerProvider is what every member's spans start on (DESIGN §17); nil means the global provider.
	TracerProvider trace.TracerProvider
}

func (cfg FormationConfig) getenv() func(string) string {
	if cfg.Getenv == nil {
		return os.Getenv
	}
	return cfg.Getenv
}

// RunningMember is one started member: its door's URL and its session.
type RunningMember struct {
	Name    string
	URL     string // the base URL its door answers at
	Session *member.Session
	// Replica is the name of this process's replica of the member; "" for a member of one process.
	Replica string
	replica *replica.Coordinator // nil for a member of one process
	feed    *events.Feed         // a replica's streams; nil for a member of one process
	store   store.Tasks
	push    pushNotifier // the member's push configs and their delivery
	server  *http.Server
	ln      net.Listener
}

// Formation is a set of started members.
type Formation struct {
	cfg     FormationConfig
	isolate func() sandbox.Isolation // what the host allows around commands, probed once for every member
	process prometheus.Gatherer      // the Go and process collectors, which every door's /metrics serves
	loaded  *capsules                // the capsules the members run, each loaded once
	Members []*RunningMember
	errc    chan error
	wg      sync.WaitGroup
}

// StartFormation stages and starts the configured members: for each, its capsule is loaded, its store
// opened and recovered, its session started and its door listening. On any error everything started so
// far is shut down again.
func StartFormation(cfg FormationConfig) (*Formation, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	names := cfg.Only
	if len(names) == 0 {
		names = cfg.Roster.Names()
	}
	f := &Formation{cfg: cfg, errc: make(chan error, len(names)), isolate: sync.OnceValue(sandbox.Probe),
		process: processRegistry(), loaded: loadedCapsules(cfg.Capsules)}
	// Every door listens first, so a member on port 0 has its real URL before any session (whose
	// call-member reaches peers by URL) starts. The formation works on its own copy of the roster.
	r := *cfg.Roster
	r.Members = slices.Clone(cfg.Roster.Members)
	f.cfg.Roster = &r
	listeners := make(map[string]net.Listener, len(names))
	closeAll := func() {
		for _, ln := range listeners {
			ln.Close()
		}
	}
	index := make(map[string]int, len(r.Members))
	for i, m := range r.Members {
		index[m.Name] = i
	}
	for _, name := range names {
		i, ok := index[name]
		if !ok {
			closeAll()
			return nil, fmt.Errorf("%s: no member named %q; the members are %v", r.Path, name, r.Names())
		}
		listen := r.Members[i].Listen
		if cfg.Listen != "" {
			listen = cfg.Listen
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("member %s: door cannot listen on %s: %w (set listen: in roster.yaml, or MUR_LISTEN)", name, listen, err)
		}
		listeners[name] = ln
		switch {
		case strings.HasSuffix(listen, ":0") || r.Members[i].URL == "":
			r.Members[i].URL = "http://" + ln.Addr().String()
		case cfg.Listen != "" && r.Members[i].URL == listenURL(r.Members[i].Listen):
			// The roster's URL was its listen address's (no url: of its own): the door is where
			// --listen (MUR_LISTEN) put it.
			r.Members[i].URL = listenURL(ln.Addr().String())
		}
	}
	// The members start side by side: most of a start is waiting on the disk (a new store's file, its
	// log and their fsyncs), so a formation of a thousand starts in the time of a few dozen one after
	// another. f.Members keeps the roster's order.
	started := make([]*RunningMember, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	slots := make(chan struct{}, startParallel)
	for i, name := range names {
		m, ln := r.Members[index[name]], listeners[name]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			rm, err := f.start(m, ln)
			if err != nil {
				errs[i] = fmt.Errorf("member %s: %w", name, err)
				return
			}
			started[i] = rm
		})
	}
	wg.Wait()
	for _, rm := range started {
		if rm != nil {
			f.Members = append(f.Members, rm)
		}
	}
	for _, err := range errs {
		if err != nil { // the first in the roster's order; the others are likely the same
			_ = f.Shutdown(context.Background()) // already failing: the first member's error is the one to report
			return nil, err
		}
	}
	return f, nil
}

// startParallel is how many members StartFormation starts at once.
const startParallel = 8

// start starts member m behind the listener its door serves on: its store, its session, its push
// notifier and its door. On an error what it opened is closed again, ln included.
func (f *Formation) start(m roster.Member, ln net.Listener) (_ *RunningMember, err error) {
	cfg := f.cfg
	var (
		st       store.Tasks
		sess     *member.Session
		notifier pushNotifier
	)
	defer func() {
		if err == nil {
			return
		}
		ln.Close()
		if sess != nil {
			_ = sess.Close(context.Background()) // already failing: the start's error is the one to report
		}
		if notifier != nil {
			_ = notifier.Close()
		}
		if st != nil {
			_ = st.Close()
		}
	}()
	p, err := f.place(m)
	if err != nil {
		return nil, err
	}
	// The capsule's store.retention overrides the roster's, key by key; the store fills in the defaults.
	// The files kept for the artifacts of the tasks retention removes go with them.
	opened, sqlite, created, err := openStore(context.Background(), m, p.replica, p.caps, cfg, p.dir, p.log, func(ids []a2a.TaskID) {
		if err := converse.RemoveKept(p.artifacts(), ids); err != nil {
			p.log.Warn("deleting the kept artifact files of tasks retention removed", "err", err)
		}
	})
	if err != nil {
		return nil, err
	}
	st = opened
	control, err := LoadControlTokens(p.caps, cfg.ControlToken)
	if err != nil {
		return nil, err
	}
	reg, wrapped := memberRegistry(m.Name, f.process)
	wrapped = replicaRegisterer(wrapped, p.replica)
	series, err := metrics.New(wrapped)
	if err != nil {
		return nil, err
	}
	hub := events.New(events.Config{Now: cfg.Now})
	// The session publishes to the hub (push observes it) and the door streams from it; a replica's
	// streams follow the shared store's numbered events instead, whichever replica runs the task.
	var publisher events.Publisher = hub
	var streams Streams = hub
	feed := replicaFeed(st, p.replica, hub, p.log)
	if feed != nil {
		publisher, streams = feed, feed
	}
	coord, err := startReplica(m, p.replica, st, cfg, feed, func(err error) {
		select {
		case f.errc <- fmt.Errorf("member %s: %w", m.Name, err):
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	if sess, err = f.startSession(p, st, series, publisher, coord, control); err != nil {
		return nil, err
	}
	if err := bindReplica(coord, sess); err != nil {
		return nil, err
	}
	// The notifier opens once the session has recovered the store, so its first round finds the tasks
	// a restart ended too; no task arrives before the door opens.
	// Push configs live beside the tasks: in the SQLite file, or in the PostgreSQL database every
	// replica shares (where a trigger queues the changes, so the notifier observes none).
	pn, err := openPush(m.Name, sqlite, created, st, p.caps, cfg, wrapped, p.log)
	if err != nil {
		return nil, err
	}
	notifier = pn // only now: a failed open may return a nil pointer in the interface
	if n, ok := notifier.(taskObserver); ok {
		hub.ObserveTasks(n.Changed, n.Watches)
	}
	door, err := f.newDoor(p, sess, st, reg, wrapped, control, streams, notifier)
	if err != nil {
		return nil, err
	}
	srv := NewHTTPServer(door, p.log)
	srv.RegisterOnShutdown(door.CloseStreams)
	rm := &RunningMember{Name: m.Name, URL: m.URL, Session: sess, Replica: p.replica, replica: coord, feed: feed, store: st, push: notifier, server: srv, ln: ln}
	f.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.errc <- fmt.Errorf("member %s: door: %w", m.Name, err)
		}
	})
	p.log.Info("door open", "session", sess.ID(), "records", sess.RecordsDir())
	return rm, nil
}

// newDoor makes the door of the member at p, in front of its session sess.
func (f *Formation) newDoor(p place, sess *member.Session, st store.Tasks, reg prometheus.Gatherer, wrapped prometheus.Registerer,
	control []ControlToken, streams Streams, pushes PushConfigs) (*Door, error) {
	cfg := f.cfg
	// GET /replicas reads a replica's shared store; a member of one process has no replicas to list.
	var replicas ReplicaSet
	if rs, ok := st.(ReplicaSet); ok && p.replica != "" {
		replicas = rs
	}
	return NewDoor(DoorConfig{
		Member: p.m.Name, Roster: cfg.Roster, Executor: sess, Tokens: cfg.Tokens,
		Card:    NewCard(p.m.Name, p.caps.Description, cfg.Version, p.m.URL, cfg.Roster.Formation),
		MaxBody: cfg.MaxBody, MaxStreams: cfg.MaxStreams, Gatherer: reg, Registerer: wrapped, Logger: p.log,
		ExportRoot: sess.ExportRoot(), AnswersMessage: p.caps.AnswersWithMessage(), Now: cfg.Now, Events: streams, Push: pushes,
		Control: sess, ControlTokens: control, Replicas: replicas, TracerProvider: cfg.TracerProvider,
		Files: replicaFiles(st, p.replica), // peer and artifact files at any replica (DESIGN §16)
	})
}

// place is where a member started on this host keeps its state, what it runs, and what it logs as.
type place struct {
	m       roster.Member
	caps    *capsule.Capsule
	replica string // this process's replica of the member; "" for a member of one process
	dir     string // the member's data directory (its replica's, for a replica)
	log     *slog.Logger
}

func (p place) runtimeRoot() string { return filepath.Join(p.dir, "run") }
func (p place) artifacts() string   { return filepath.Join(p.dir, "artifacts") }

// place loads m's capsule and finds its data directory, whose runtime root it clears: nothing of an
// earlier process is live, so what its sessions left there (a killed one's tool copies, its MCP config)
// goes before this member's first session starts.
func (f *Formation) place(m roster.Member) (place, error) {
	caps, err := f.loaded.load(m.Capsule)
	if err != nil {
		return place{}, err
	}
	name, err := replicaName(m, f.cfg)
	if err != nil {
		return place{}, err
	}
	p := place{m: m, caps: caps, replica: name, dir: filepath.Join(f.cfg.DataDir, "members", m.Name),
		log: f.cfg.Logger.With("member", m.Name)}
	if name != "" {
		// Replicas sharing a data directory keep their workdirs and runtime directories apart.
		p.dir = filepath.Join(p.dir, "replicas", name)
		p.log = p.log.With("replica", name)
	}
	if left, err := setup.ClearRuntimeRoot(p.runtimeRoot()); err != nil {
		return place{}, err
	} else if len(left) > 0 {
		p.log.Info("removed the runtime directories an earlier process left", "count", len(left), "dir", p.runtimeRoot())
	}
	return p, nil
}

// capsules loads each capsule directory once for a formation: the members that run the same capsule
// share its parse, which nothing changes once it is loaded.
type capsules struct {
	mu    sync.Mutex // guards byDir
	byDir map[string]func() (*capsule.Capsule, error)
}

// loadedCapsules are the capsules of a formation, starting with those given (FormationConfig's Capsules).
func loadedCapsules(given map[string]*capsule.Capsule) *capsules {
	c := &capsules{byDir: make(map[string]func() (*capsule.Capsule, error), len(given))}
	for dir, caps := range given {
		c.byDir[dir] = func() (*capsule.Capsule, error) { return caps, nil }
	}
	return c
}

// load returns the capsule in dir, loading it at the first call for dir; a concurrent call for the same
// dir waits for that load.
func (c *capsules) load(dir string) (*capsule.Capsule, error) {
	c.mu.Lock()
	load, ok := c.byDir[dir]
	if !ok {
		load = sync.OnceValues(func() (*capsule.Capsule, error) { return capsule.Load(dir) })
		c.byDir[dir] = load
	}
	c.mu.Unlock()
	return load()
}

// startSession starts the session of the member at p on its store st.
func (f *Formation) startSession(p place, st store.Tasks, series *metrics.Series, publisher events.Publisher,
	coord *replica.Coordinator, control []ControlToken) (*member.Session, error) {
	cfg := f.cfg
	return member.Start(member.Config{
		Member: p.m.Name, Formation: cfg.Roster.Formation, Capsule: p.caps, Store: st,
		RecordsRoot: cfg.RecordsRoot, DataDir: cfg.DataDir, WorkDir: filepath.Join(p.dir, "work"), RuntimeRoot: p.runtimeRoot(),
		ProjectDir: cfg.Roster.Dir, DoorURL: p.m.URL, ArtifactsDir: p.artifacts(),
		Metrics: series, Logger: cfg.Logger, Now: cfg.Now,
		Roster: cfg.Roster, FormationToken: cfg.Tokens.Formation, Secrets: memberSecrets(cfg.Tokens, control), ConfineHelper: cfg.ConfineHelper,
		Events: publisher, Replicas: sessionReplicas(coord), TracerProvider: cfg.TracerProvider, Isolate: f.isolate,
		StartToolServer: func(ts harness.ToolSet) (harness.ToolServer, error) { return StartToolServer(ts, p.log) },
	})
}

// NewHTTPServer returns an http.Server for a door with timeouts that keep slow clients from holding it.
// There is no write timeout: a blocking SendMessage is held open until its task ends.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Err returns a channel that receives the first error of a door's listener.
func (f *Formation) Err() <-chan error { return f.errc }

// Shutdown closes the sessions first, so tasks in flight end canceled and their blocking requests are
// answered, then the doors, then the stores.
func (f *Formation) Shutdown(ctx context.Context) error {
	var errs []error
	for _, m := range f.Members {
		if m.replica != nil {
			m.replica.Close() // it claims nothing more for a session that is closing
		}
		errs = append(errs, m.Session.Close(ctx))
	}
	for _, m := range f.Members {
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("member %s: door shutdown: %w", m.Name, err))
			_ = m.server.Close() // its connections dropped; the shutdown's error is reported
		}
	}
	f.wg.Wait()
	for _, m := range f.Members {
		if m.feed != nil {
			m.feed.Close()
		}
		if m.push != nil {
			errs = append(errs, m.push.Close())
		}
		errs = append(errs, m.store.Close())
	}
	return errors.Join(errs...)
}

// pushNotifier is a member's push notifier: push's on its SQLite file, pgpush's on its PostgreSQL
// database.
type pushNotifier interface {
	PushConfigs
	Close() error
}

// taskObserver is a push notifier that observes the task changes the session publishes (events.Hub's
// ObserveTasks): push's, not pgpush's, which a trigger tells.
type taskObserver interface {
	Changed(events.Change)
	Watches(a2a.TaskID) bool
}

var (
	_ taskObserver = (*push.Notifier)(nil)
	_ taskObserver = (*lazyPush)(nil)
)

// openPush opens a member's push notifier beside its task store (on sqlite, the store's file, when it
// is not ""), with the capsule's push.allow and bounds. On a file this start created (created), it
// opens at the first push call instead (lazyPush).
func openPush(name, sqlite string, created bool, st store.Tasks, caps *capsule.Capsule, cfg FormationConfig, reg prometheus.Registerer, log *slog.Logger) (pushNotifier, error) {
	allow, err := push.NewAllowlist(caps.Push.Allow)
	if err != nil {
		return nil, err
	}
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "push_deliveries_total",
		Help: "Push notification delivery attempts, by outcome: ok, retry (failed, tried again later), gave_up."}, []string{"outcome"})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mur", Name: "push_dropped_total",
		Help: "Task changes not delivered to a webhook because its outbox (or the queue to the outboxes) was full; the latest change is always delivered."})
	for _, c := range []prometheus.Collector{deliveries, dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	pc := push.Config{Path: sqlite, Allow: allow, Backoff: cfg.PushBackoff, Logger: log,
		ConfigsPerTask: caps.Push.MaxConfigsPerTask, ConfigsPerCaller: caps.Push.MaxConfigsPerCaller,
		Delivered: func(outcome string) { deliveries.WithLabelValues(outcome).Inc() },
		Dropped:   dropped.Inc, Settle: st.Settle, TracerProvider: cfg.TracerProvider, Member: name}
	if pg, ok := st.(*postgres.Store); ok {
		return pgpush.Open(pg, pgpush.Config{Push: pc})
	}
	if sqlite == "" {
		return nil, fmt.Errorf("push: the task store %T keeps no push notification configs", st)
	}
	if created {
		return &lazyPush{open: func() (*push.Notifier, error) { return push.Open(pc) }, allow: allow}, nil
	}
	return push.Open(pc)
}

// listenURL is the URL the roster gives a member from its listen address alone: a wildcard host is
// reached on 127.0.0.1.
func listenURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
