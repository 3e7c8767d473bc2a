package stage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/member/store/postgres"
	"github.com/murmur-run/murmur/roster"
)

// The codes of a member's task store on PostgreSQL (DESIGN §16).
const (
	// CodeStoreUnusable: the store's database cannot be used: its password is missing, or the database
	// is unreachable, refuses the user, or does not exist.
	CodeStoreUnusable = "E-STORE-001"
	// CodeStoreNewer: the database's schema was written by a newer mur, which this one refuses.
	CodeStoreNewer = "E-STORE-002"
	// CodeStoreReplicas: a member with replicas above 1 keeps its tasks in its own SQLite file, which
	// replicas cannot share.
	CodeStoreReplicas = "E-STORE-003"
)

// storeCheckTimeout bounds mur check's look at one member's database.
const storeCheckTimeout = 15 * time.Second

// storeFindings checks member m's task store when it is on PostgreSQL (its roster entry's store:, else
// MUR_STORE): that its password can be found and the database reached and used, and that its schema is
// not a newer mur's. A database no mur has used yet is fine: the member creates its schema.
func storeFindings(m roster.Member, getenv func(string) string) []Finding {
	raw, ref := m.Store, m.StorePassword
	if raw == "" {
		raw, ref = getenv("MUR_STORE"), ""
	}
	if raw == "" {
		if f, ok := ReplicasFinding(m, raw); ok {
			return []Finding{f}
		}
		return nil
	}
	dsn, err := postgres.Address(raw, ref, getenv)
	if err != nil {
		return []Finding{{Code: CodeStoreUnusable, Member: m.Name, Message: err.Error()}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeCheckTimeout)
	defer cancel()
	if _, err := postgres.Check(ctx, dsn); err != nil {
		code := CodeStoreUnusable
		if errors.Is(err, postgres.ErrNewerSchema) {
			code = CodeStoreNewer
		}
		return []Finding{{Code: code, Member: m.Name, Message: fmt.Sprint(err)}}
	}
	return nil
}

// ReplicasFinding is the E-STORE-003 finding of member m when it runs as replicas (replicas: above 1)
// while its tasks are in its own SQLite file, which replicas cannot share: store is the store URL the
// member will use (its store:, else MUR_STORE where the member runs), "" for SQLite. ok is false when
// there is nothing to say. mur export asks it with the roster's store: alone, since the containers it
// writes are given no MUR_STORE.
func ReplicasFinding(m roster.Member, store string) (f Finding, ok bool) {
	if store != "" || m.ReplicaCount() <= 1 {
		return Finding{}, false
	}
	return Finding{Code: CodeStoreReplicas, Member: m.Name, Message: fmt.Sprintf(
		"replicas: %d, and the member's tasks are in its own SQLite file: replicas share their tasks through PostgreSQL; "+
			"give the member store: postgres://user@host:5432/database (with store_password: env:NAME), or replicas: 1", m.ReplicaCount())}, true
}
