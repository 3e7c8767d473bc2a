package stage

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/roster"
)

// A member with replicas above 1 whose tasks would be in its own SQLite file is refused with
// E-STORE-003, saying what to write; with a store: of its own, with MUR_STORE set, or with one replica,
// it is not (a store that cannot be used is E-STORE-001's business).
func TestReplicasNeedASharedStore(t *testing.T) {
	const refused = "replicas: 3, and the member's tasks are in its own SQLite file: replicas share their tasks through PostgreSQL; " +
		"give the member store: postgres://user@host:5432/database (with store_password: env:NAME), or replicas: 1"
	// Nothing listens on port 1 of the loopback: a store there fails at once, with E-STORE-001.
	const nowhere = "postgres://murmur@127.0.0.1:1/murmur?connect_timeout=5"
	for _, tc := range []struct {
		name     string
		member   roster.Member
		murStore string
		want     []string // the codes found
	}{
		{"three replicas on SQLite", roster.Member{Name: "worker", Replicas: 3}, "", []string{CodeStoreReplicas}},
		{"the most replicas on SQLite", roster.Member{Name: "worker", Replicas: roster.MaxReplicas}, "", []string{CodeStoreReplicas}},
		{"one replica on SQLite", roster.Member{Name: "worker", Replicas: 1}, "", nil},
		{"replicas not said, on SQLite", roster.Member{Name: "worker"}, "", nil},
		{"three replicas on the roster's store", roster.Member{Name: "worker", Replicas: 3, Store: nowhere, StorePassword: "env:NOT_SET"}, "", []string{CodeStoreUnusable}},
		{"three replicas on MUR_STORE", roster.Member{Name: "worker", Replicas: 3}, nowhere, []string{CodeStoreUnusable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "MUR_STORE" {
					return tc.murStore
				}
				return ""
			}
			got := storeFindings(tc.member, getenv)
			var codes []string
			for _, f := range got {
				codes = append(codes, f.Code)
				if f.Member != "worker" {
					t.Errorf("finding %v names member %q", f, f.Member)
				}
			}
			if diff := cmp.Diff(tc.want, codes); diff != "" {
				t.Errorf("codes (-want +got):\n%s\nfindings: %v", diff, got)
			}
		})
	}
	f, ok := ReplicasFinding(roster.Member{Name: "worker", Replicas: 3}, "")
	if want := (Finding{Code: CodeStoreReplicas, Member: "worker", Message: refused}); !ok || f != want {
		t.Errorf("ReplicasFinding = %+v, %v; want %+v", f, ok, want)
	}
	if want := "E-STORE-003: member worker: " + refused; f.String() != want {
		t.Errorf("printed as %q, want %q", f.String(), want)
	}
}
