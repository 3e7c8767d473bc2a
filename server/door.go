package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/roster"
	"github.com/prometheus/client_golang/prometheus"
)

// Executor is what a door needs of a member's session.
type Executor interface {
	Send(ctx context.Context, msg *a2a.Message, origin member.Origin) (*a2a.Task, error)
	Wait(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	Get(ctx context.Context, id a2a.TaskID, historyLength *int) (*a2a.Task, error)
	GetJSON(ctx context.Context, id a2a.TaskID) ([]byte, error)
	List(ctx context.Context, q member.ListQuery) (member.ListPage, error)
	Cancel(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	Ping(ctx context.Context) error
}

var _ Executor = (*member.Session)(nil)

// DefaultMaxBody is the default limit of a JSON-RPC request body.
const DefaultMaxBody = 4 << 20

// DoorConfig is everything a door is given.
type DoorConfig struct {
	Member     string         // the member's name
	Roster     *roster.Roster // who may call this member; nil admits no peer
	Executor   Executor
	Tokens     Tokens
	Card       a2a.AgentCard
	MaxBody    int64 // 0: DefaultMaxBody
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer // carries the member label
	Logger     *slog.Logger
	// ExportRoot is the directory GET /peer-files/{handle} serves this member's shared files from (the
	// session's ExportRoot); "" when the member exports nothing.
	ExportRoot string
	// Now is the clock handles' expiry is checked against; nil means time.Now.
	Now func() time.Time
}

// Door is one member's HTTP surface.
type Door struct {
	cfg     DoorConfig
	metrics *doorMetrics
	card    cardBody
	handler http.Handler
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
	m, err := newDoorMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	card, err := newCardBody(cfg.Card)
	if err != nil {
		return nil, err
	}
	d := &Door{cfg: cfg, metrics: m, card: card}
	d.handler = d.routes()
	return d, nil
}

// ServeHTTP serves the door's routes.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }
