package server

import (
	"context"
	"net/http"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// ReplicaSet is what GET /replicas reads of a replicated member's shared store (DESIGN §16): the
// PostgreSQL store opened with a replica name.
type ReplicaSet interface {
	// Replica is this process's replica name.
	Replica() string
	// Replicas lists the member's replicas with a lease row, live or lapsed.
	Replicas(ctx context.Context) ([]store.ReplicaInfo, error)
	// Owners maps each unended task a replica claimed to that replica.
	Owners(ctx context.Context) (map[a2a.TaskID]string, error)
}

// replicaEntry is one replica in GET /replicas.
type replicaEntry struct {
	Name       string    `json:"name"`
	Started    time.Time `json:"started"`
	LeaseUntil time.Time `json:"leaseUntil"`
	Free       int       `json:"free"`
	Live       bool      `json:"live"` // its lease runs until now or later, by this door's clock
}

// replicasAnswer is the body of GET /replicas.
type replicasAnswer struct {
	Replica  string                `json:"replica"`
	Replicas []replicaEntry        `json:"replicas"`
	Owners   map[a2a.TaskID]string `json:"owners"`
}

// serveReplicas is GET /replicas (DESIGN §16): for the operator, the member's replicas (each one's
// name, start, lease, free places and whether its lease is live), the replica answering, and which
// replica runs each unended task. Answers are JSON: 200; 401 without a valid token; 403 for a peer's
// credential (the replicas are the operator's to see); 404 when the member runs as one process; 503
// when the shared store cannot be read.
func (d *Door) serveReplicas(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		w.Header().Set("Cache-Control", "no-store")
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="murmur"`)
		}
		writeJSON(w, status, map[string]string{"error": msg})
	}
	caller, why := d.auth.authenticate(r)
	switch caller.Principal {
	case Nobody:
		d.pacer.pace(r.Context())
		fail(http.StatusUnauthorized, why)
		return
	case Peer:
		fail(http.StatusForbidden, "GET /replicas is the operator's: a member's peer credential does not read its replicas; send the operator token")
		return
	}
	rs := d.cfg.Replicas
	if rs == nil || rs.Replica() == "" {
		fail(http.StatusNotFound, d.cfg.Member+" runs as one process, not as replicas: it has none to list (a member runs as replicas with store: postgres://… and replicas: N above 1 in roster.yaml, or MUR_REPLICA)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	infos, err := rs.Replicas(ctx)
	var owners map[a2a.TaskID]string
	if err == nil {
		owners, err = rs.Owners(ctx)
	}
	if err != nil {
		d.cfg.Logger.Warn("GET /replicas: reading the shared task store", "err", err)
		fail(http.StatusServiceUnavailable, "the member's shared task store could not be read: "+err.Error())
		return
	}
	now := d.cfg.Now()
	out := replicasAnswer{Replica: rs.Replica(), Replicas: make([]replicaEntry, 0, len(infos)), Owners: owners}
	if out.Owners == nil {
		out.Owners = map[a2a.TaskID]string{}
	}
	for _, ri := range infos {
		out.Replicas = append(out.Replicas, replicaEntry{Name: ri.Name, Started: ri.Started, LeaseUntil: ri.LeaseUntil,
			Free: ri.Free, Live: !ri.LeaseUntil.Before(now)})
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
