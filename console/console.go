package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
)

//go:embed web
var webFS embed.FS

// Config says which formation the console shows and how it reaches it.
type Config struct {
	// Roster is the formation: its members, with URL the address the console reaches each door at, and
	// its reach rules (the graph).
	Roster *roster.Roster
	// Token is the operator token: the doors' bearer credential, and what the login form accepts.
	Token string
	// RecordsRoot is where the sessions' records directories are (one per session, each with its
	// trace.jsonl); "" when the records are not on this machine: task pages then show what the doors say.
	RecordsRoot string
	// Poll is how often the doors and the records are read; 0 means DefaultPoll.
	Poll time.Duration
	// HTTPClient reads the doors; nil means a client with a 20 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger

	// TraceURL is the trace UI's page of a trace, naming it by TracePlaceholder, such as
	// http://localhost:16686/trace/{trace_id} for Jaeger (mur: MUR_TRACE_URL); a task's page links to its
	// trace there. "" shows the trace id without a link.
	TraceURL string
}

// DefaultPoll is how often the console reads the doors and the records while a page is open.
const DefaultPoll = 500 * time.Millisecond

// idleEvery is how many poll intervals pass between reads while no page is open.
const idleEvery = 10

// Console serves the formation console.
type Console struct {
	cfg     Config
	auth    *auth
	hub     *hub
	members []*memberWatch
	byName  map[string]*memberWatch
	records *index
	tmpl    *template.Template
	static  http.Handler
	log     *slog.Logger
	mux     *http.ServeMux

	// stream is the client of the doors' streams: cfg.HTTPClient's transport without its timeout (a
	// stream lasts as long as its task); followTask bounds how long one may stay silent.
	stream *http.Client

	// wake asks the records loop to read at once (a page was opened); each member has its own.
	wake    chan struct{}
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	started bool
	closed  bool // Close has begun: no more goroutines start
	mu      sync.Mutex
}

// New returns a console for cfg; Start begins reading the formation.
func New(cfg Config) (*Console, error) {
	if cfg.Roster == nil || len(cfg.Roster.Members) == 0 {
		return nil, errors.New("console: the roster has no members to show")
	}
	if cfg.Token == "" {
		return nil, errors.New("console: no operator token: the console reads the doors with it, and logins need it")
	}
	if err := checkTraceURL(cfg.TraceURL); err != nil {
		return nil, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = httpClient()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(webFS, "web/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	static, _ := fs.Sub(webFS, "web/static")
	c := &Console{cfg: cfg, auth: newAuth(cfg.Token, time.Now), hub: newHub(), byName: map[string]*memberWatch{},
		records: newIndex(cfg.RecordsRoot, cfg.Roster.Formation), tmpl: tmpl,
		static: http.StripPrefix("/static/", http.FileServerFS(static)), log: cfg.Logger,
		stream: &http.Client{Transport: cfg.HTTPClient.Transport, Jar: cfg.HTTPClient.Jar}, wake: make(chan struct{}, 1)}
	for _, m := range cfg.Roster.Members {
		url := strings.TrimRight(m.URL, "/")
		mw := &memberWatch{Name: m.Name, URL: url, client: a2a.NewClient(url+"/a2a", cfg.Token, cfg.HTTPClient), token: cfg.Token,
			tasks: map[string]*TaskRow{}, counts: map[a2a.TaskState]int{}, wake: make(chan struct{}, 1),
			following: map[string]bool{}, refollow: map[string]time.Time{}}
		c.members = append(c.members, mw)
		c.byName[m.Name] = mw
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.routes()
	return c, nil
}

// Start begins polling the doors, following their live tasks' streams and tailing the records; Close
// stops it.
func (c *Console) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	for _, m := range c.members {
		c.wg.Go(func() { c.pollLoop(m) })
	}
	c.wg.Go(func() { c.recordsLoop(c.wake) })
}

// Close stops the pollers and the doors' streams, ends every event stream and waits for them all.
func (c *Console) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// Handler is the console's HTTP handler.
func (c *Console) Handler() http.Handler { return c }

// LoginURL returns the URL that logs a browser in once, for a console served at base
// (e.g. http://127.0.0.1:7100): each call makes a new code, and the previous one stops working.
func (c *Console) LoginURL(base string) string {
	return strings.TrimRight(base, "/") + "/login?code=" + c.auth.newCode()
}

// wakeAll makes every reader read now, so a page that was just opened shows the formation as it is.
func (c *Console) wakeAll() {
	for _, m := range c.members {
		m.wakeUp()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// tick waits for the next read: every Poll while a page is open, every idleEvery polls otherwise, or at
// once when woken. It returns false when the console closes.
func (c *Console) tick(t *time.Ticker, wake <-chan struct{}) bool {
	for n := 1; ; n++ {
		select {
		case <-c.ctx.Done():
			return false
		case <-wake:
			return true
		case <-t.C:
			if c.hub.count() > 0 || n >= idleEvery {
				return true
			}
		}
	}
}

// pollLoop reads a member's door: its tasks that changed, which finds the new ones, whose streams it then
// follows, and whether the door answers at all.
func (c *Console) pollLoop(m *memberWatch) {
	t := time.NewTicker(c.cfg.Poll)
	defer t.Stop()
	for {
		changed, memberChanged := m.poll(c.ctx)
		if m.view().Up {
			// A replicated member's replicas, and which one runs each task (replicas.go).
			moved, replicasChanged := m.readReplicas(c.ctx, c.cfg.HTTPClient)
			for _, id := range moved {
				if !slices.Contains(changed, id) {
					changed = append(changed, id)
				}
			}
			memberChanged = memberChanged || replicasChanged
			c.followLive(m)
		}
		for _, id := range changed {
			c.hub.publish(Event{Kind: "task", Member: m.Name, Task: id})
		}
		if memberChanged || len(changed) > 0 {
			c.hub.publish(Event{Kind: "member", Member: m.Name})
		}
		if !c.tick(t, m.wake) {
			return
		}
	}
}

func (c *Console) recordsLoop(wake <-chan struct{}) {
	t := time.NewTicker(c.cfg.Poll)
	defer t.Stop()
	for {
		ch := c.records.scan()
		for task, member := range ch.tasks {
			c.hub.publish(Event{Kind: "records", Member: member, Task: task})
		}
		if ch.calls {
			c.hub.publish(Event{Kind: "calls"})
		}
		if ch.other && len(ch.tasks) == 0 {
			c.hub.publish(Event{Kind: "member"})
		}
		if !c.tick(t, wake) {
			return
		}
	}
}

// ServeHTTP refuses other origins, sets the security headers and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if from := foreignOrigin(r); from != "" {
		c.log.Warn("console: refused a request from another origin", "from", from, "path", r.URL.Path)
		c.errorPage(w, r, http.StatusForbidden, "Refused: another origin",
			"The console answers only its own pages. This request came from another origin ("+from+"), so it was refused and nothing was done.")
		return
	}
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.loginPost)
	mux.Handle("GET /static/", c.static)
	mux.HandleFunc("GET /{$}", c.authed(c.formationPage))
	mux.HandleFunc("GET /members/{member}", c.authed(c.memberPage))
	mux.HandleFunc("GET /members/{member}/tasks/{task}", c.authed(c.taskPage))
	mux.HandleFunc("GET /tasks/{task}", c.authed(c.findTask))
	mux.HandleFunc("GET /events", c.authed(c.events))
	mux.HandleFunc("POST /send", c.acting(c.send))
	mux.HandleFunc("POST /cancel", c.acting(c.cancel))
	mux.HandleFunc("POST /answer", c.acting(c.answer))
	mux.HandleFunc("POST /logout", c.acting(c.logout))
	mux.HandleFunc("/", c.authed(func(w http.ResponseWriter, r *http.Request, _ *loginSession) {
		c.errorPage(w, r, http.StatusNotFound, "No such page", "The console has no page at "+r.URL.Path+". Start from the formation page.")
	}))
	c.mux = mux
}

type authedHandler func(http.ResponseWriter, *http.Request, *loginSession)

// authed serves h to a logged-in browser; others get the login page (or, for the event stream, 401).
func (c *Console) authed(h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.auth.session(r)
		if s == nil {
			if r.URL.Path == "/events" || r.Header.Get("X-Console-Fragment") != "" {
				http.Error(w, "not logged in: open the login URL that mur printed", http.StatusUnauthorized)
				return
			}
			c.render(w, http.StatusUnauthorized, "login", loginData{Title: "Log in", Next: r.URL.RequestURI()})
			return
		}
		h(w, r, s)
	}
}

// acting serves a state-changing request: a login session and its anti-CSRF token are both needed.
func (c *Console) acting(h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.auth.session(r)
		if s == nil {
			c.errorPage(w, r, http.StatusUnauthorized, "Not logged in",
				"Nothing was done: this browser is not logged in to the console. Open the login URL that mur printed, or log in with the operator token.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		tok := r.Header.Get("X-CSRF-Token")
		if tok == "" {
			tok = r.PostFormValue("csrf")
		}
		if !equal(tok, s.csrf) {
			c.errorPage(w, r, http.StatusForbidden, "Refused: the form's token is missing or stale",
				"Nothing was done: the request did not carry this login's anti-CSRF token. Reload the page and try again.")
			return
		}
		h(w, r, s)
	}
}

type loginData struct {
	Title string
	Next  string
	Error string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	if code == "" {
		c.render(w, http.StatusOK, "login", loginData{Title: "Log in", Next: "/"})
		return
	}
	if !c.auth.useCode(code) {
		c.render(w, http.StatusUnauthorized, "login", loginData{Title: "Log in", Next: "/",
			Error: "That login code is not valid: each printed login URL works once. Log in with the operator token below, or restart mur for a new URL."})
		return
	}
	setSessionCookie(w, c.auth.open(), r.TLS != nil)
	// A page, not a redirect: the next request then comes from the console's own page, so the
	// SameSite=Strict cookie goes with it even when the URL was opened from another application.
	c.render(w, http.StatusOK, "welcome", loginData{Title: "Logged in", Next: "/"})
}

func (c *Console) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := r.PostFormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		next = "/"
	}
	if !equal(strings.TrimSpace(r.PostFormValue("token")), c.cfg.Token) {
		c.render(w, http.StatusUnauthorized, "login", loginData{Title: "Log in", Next: next,
			Error: "That is not the operator token. It is in .murmur/operator.token beside the roster (or MUR_OPERATOR_TOKEN)."})
		return
	}
	setSessionCookie(w, c.auth.open(), r.TLS != nil)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	c.auth.close(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	c.render(w, http.StatusOK, "login", loginData{Title: "Logged out", Next: "/", Error: "Logged out."})
}

// events streams Events to the page (server-sent events) until the browser goes away or the console
// closes.
func (c *Console) events(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s := c.hub.subscribe()
	defer c.hub.unsubscribe(s)
	c.wakeAll()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: murmur console\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case e := <-s.ch:
			if c.hub.takeLagged(s) {
				e = Event{Kind: "resync"}
			}
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", mustJSON(e)); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

// Listen opens addr for the console: "off" (or "") means no console. A bare port means loopback.
func Listen(addr string) (net.Listener, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--console %q: give an address such as 127.0.0.1:0 or 127.0.0.1:7100, or off", addr)
	}
	return net.Listen("tcp", addr)
}

// Serve serves the console on ln until ctx ends, then shuts the server down and closes the console.
// It prints nothing; the caller prints LoginURL.
func (c *Console) Serve(ctx context.Context, ln net.Listener) error {
	c.Start()
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	c.stop() // ends the event streams, so Shutdown does not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		// Shutdown ran out of time: Close cuts the connections left. Its only error would be closing the
		// listener, which Shutdown already closed.
		_ = srv.Close()
	}
	if err == nil {
		err = <-errc
	}
	c.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
