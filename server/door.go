package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/roster"
)

// Executor is what a door needs of a member's session.
// Every read and cancel carries the scope of the request: the tasks its caller may see.
type Executor interface {
	Send(ctx context.Context, msg *a2a.Message, origin member.Origin) (*a2a.Task, error)
	Wait(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	// WaitJSON is Wait answering the stored task's JSON, which the caller must not modify.
	WaitJSON(ctx context.Context, id a2a.TaskID) ([]byte, error)
	Get(ctx context.Context, id a2a.TaskID, historyLength *int, scope store.Scope) (*a2a.Task, error)
	GetJSON(ctx context.Context, id a2a.TaskID, scope store.Scope) ([]byte, error)
	List(ctx context.Context, q store.ListQuery, scope store.Scope) (store.ListPage, error)
	Cancel(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error)
	Ping(ctx context.Context) error
	// RecordRefusal records a peer's request refused for claiming another identity than its credential.
	RecordRefusal(fields map[string]any)
	// ArtifactFile is the kept file of a task's artifact served by URL, and its media type.
	ArtifactFile(ctx context.Context, id a2a.TaskID, name string, scope store.Scope) (path, mediaType string, err error)
}

var _ Executor = (*member.Session)(nil)

// DefaultMaxBody is the default limit of a JSON-RPC request body.
const DefaultMaxBody = 4 << 20

// DoorConfig is everything a door is given.
type DoorConfig struct {
	Member   string         // the member's name
	Roster   *roster.Roster // who may call this member; nil admits no peer
	Executor Executor
	Tokens   Tokens
	Card     a2a.AgentCard
	MaxBody  int64 // 0: DefaultMaxBody
	// BodyBudget bounds the request bodies the door holds at once; 0: DefaultBodyBudget.
	BodyBudget int64
	// RefusalRate is how many refusals a second the door answers at once before it paces them; 0:
	// DefaultRefusalRate.
	RefusalRate int
	Gatherer    prometheus.Gatherer
	Registerer  prometheus.Registerer // carries the member label
	Logger      *slog.Logger
	// ExportRoot is the directory GET /peer-files/{handle} serves this member's shared files from (the
	// session's ExportRoot); "" when the member exports nothing.
	ExportRoot peerfile.Root
	// AnswersMessage answers a blocking SendMessage whose task completed in one turn without tools with
	// the answer as a Message (murmur.yaml answers: message).
	AnswersMessage bool
	// Now is the clock handles' expiry is checked against; nil means time.Now.
	Now func() time.Time
	// Events is what the door's streams (SendStreamingMessage, SubscribeToTask) subscribe to: the hub
	// the member's session publishes to, or, on a replica, the feed of the shared store's events; with
	// it the card says capabilities.streaming. nil: no streaming.
	Events Streams
	// Control is the session the control surface (POST /control) changes, with ControlTokens the tokens
	// that open it; without tokens the route answers 404.
	Control       Controller
	ControlTokens []ControlToken
	// Push keeps the member's push notification configs; with it the door serves the four
	// TaskPushNotificationConfig methods and its card says capabilities.pushNotifications. nil: -32003.
	Push PushConfigs
	// StreamKeepAlive is how often an idle stream gets an SSE comment; 0: DefaultKeepAlive.
	StreamKeepAlive time.Duration
	// StreamWriteTimeout bounds one write to a stream's client; 0: DefaultStreamWriteTimeout.
	StreamWriteTimeout time.Duration
	// MaxStreams is how many streams one caller (the operator, a peer member) may hold open at once;
	// 0: DefaultMaxStreams.
	MaxStreams int
	// Replicas is the shared store of a member run as replicas (DESIGN §16), which GET /replicas reads;
	// nil for a member of one process (the route answers 404).
	Replicas ReplicaSet
	// Files is the shared store of a member run as replicas as the keeper of its peer files and of its
	// artifacts' large files, which the door serves whichever replica made them; nil for a member of
	// one process, whose door serves them from its workdir.
	Files StoredFiles
	// TracerProvider is what the door's request spans start on (DESIGN §17); nil means the global one.
	TracerProvider trace.TracerProvider
}

// Door is one member's HTTP surface.
type Door struct {
	cfg     DoorConfig
	auth    authenticator
	admit   *admission
	pacer   *refusalPacer
	streams *streamCap
	metrics *doorMetrics
	tracing doorTracing
	card    cardBody
	handler http.Handler
	rpc     http.Handler // POST /a2a, outside the router
	// closing is closed by CloseStreams: every stream ends with an error event saying the door shuts down.
	closing   chan struct{}
	closeOnce sync.Once
}

// NewDoor builds a door.
func NewDoor(cfg DoorConfig) (*Door, error) {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = DefaultKeepAlive
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	cfg.Card.Capabilities.Streaming = cfg.Events != nil
	cfg.Card.Capabilities.PushNotifications = cfg.Push != nil
	m, err := newDoorMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	card, err := newCardBody(cfg.Card, cfg.Now())
	if err != nil {
		return nil, err
	}
	formation := ""
	if cfg.Roster != nil {
		formation = cfg.Roster.Formation
	}
	d := &Door{cfg: cfg, auth: newAuthenticator(cfg.Tokens, formation), admit: newAdmission(cfg.BodyBudget),
		pacer: newRefusalPacer(cfg.RefusalRate, m.paced.Inc), streams: newStreamCap(cfg.MaxStreams), metrics: m, card: card, closing: make(chan struct{}),
		tracing: newDoorTracing(cfg.TracerProvider, cfg.Member)}
	d.handler = d.routes()
	d.rpc = middleware.Recoverer(http.HandlerFunc(d.serveJSONRPC))
	return d, nil
}

// CloseStreams ends every stream the door serves, each with an error event saying the door shuts down;
// http.Server.Shutdown does not wait for them otherwise. Register it with RegisterOnShutdown.
func (d *Door) CloseStreams() { d.closeOnce.Do(func() { close(d.closing) }) }

// ServeHTTP serves the door's routes. The JSON-RPC endpoint, which every A2A call takes, is served
// without the router's match and the request copy its route context costs; it recovers from a panic as
// the routes do.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && (r.URL.Path == "/a2a" || r.URL.Path == "/a2a/") {
		d.rpc.ServeHTTP(w, r)
		return
	}
	d.handler.ServeHTTP(w, r)
}
