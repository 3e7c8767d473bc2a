package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/replica"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// replicaName is the name this process's replica of member m goes by in its store (DESIGN §16), or ""
// when m runs as one process: MUR_REPLICA (FormationConfig.Replica), else the host's name, which is a
// container's or a pod's own. A member is replicated when its roster entry says replicas: N above 1 or a
// replica name is given, and its tasks are on PostgreSQL: replicas share nothing else.
func replicaName(m roster.Member, cfg FormationConfig) (string, error) {
	dsn, _ := memberStore(m, cfg)
	if cfg.Replica == "" && m.ReplicaCount() <= 1 {
		return "", nil
	}
	if dsn == "" {
		return "", fmt.Errorf("member %s: replicas share their tasks through PostgreSQL, and this member's are in its own SQLite file: "+
			"give it store: postgres://user@host:5432/database (with store_password: env:NAME), or run it as one process (replicas: 1, no MUR_REPLICA)", m.Name)
	}
	name := cfg.Replica
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("member %s: naming this replica: the host's name cannot be read (%v); set MUR_REPLICA", m.Name, err)
		}
		name = h
	}
	if !store.ReplicaName.MatchString(name) {
		return "", fmt.Errorf("member %s: replica name %q: a replica's name is 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit; set MUR_REPLICA (or --replica) to one", m.Name, name)
	}
	return name, nil
}

// startReplica builds the coordinator of replica name of member m on st, or returns nil when the member
// runs as one process. lost is told when the replica loses its lease.
func startReplica(m roster.Member, name string, st store.Tasks, cfg FormationConfig, feed *events.Feed, lost func(error)) (*replica.Coordinator, error) {
	if name == "" {
		return nil, nil
	}
	rs, ok := st.(store.Replicated)
	if !ok {
		return nil, fmt.Errorf("member %s: its task store cannot be shared by replicas", m.Name)
	}
	var told func(store.Notice)
	if feed != nil {
		told = feed.Tell
	}
	return replica.New(replica.Config{Store: rs, Lease: cfg.Lease, CanceledText: member.CanceledMessage, Lost: lost,
		Told: told, Now: cfg.Now, Log: cfg.Logger.With("member", m.Name)}), nil
}

// replicaFeed is the feed of a replica's streams, from the events its shared store keeps; nil for a
// member of one process.
func replicaFeed(st store.Tasks, name string, hub *events.Hub, log *slog.Logger) *events.Feed {
	el, ok := st.(store.EventLog)
	if name == "" || !ok {
		return nil
	}
	return events.NewFeed(hub, el, log)
}

// replicaRegisterer adds the replica label to every series of a replica's door and session.
func replicaRegisterer(reg prometheus.Registerer, name string) prometheus.Registerer {
	if name == "" {
		return reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"replica": name}, reg)
}

// sessionReplicas is coord as the session's Replicas: nil (not a nil *Coordinator) without one.
func sessionReplicas(coord *replica.Coordinator) replica.Peers {
	if coord == nil {
		return nil
	}
	return coord
}

// bindReplica starts coord's work for sess, through the session's side of the member's replicas.
func bindReplica(coord *replica.Coordinator, sess *member.Session) error {
	if coord == nil {
		return nil
	}
	return coord.Start(context.Background(), sess.Replica())
}
