package stage

import (
	"strings"
	"testing"

	"github.com/murmur-run/murmur/roster"
)

// A member with replicas above 1 whose tasks would be in its own SQLite file is refused with
// E-STORE-003, saying what to write; with MUR_STORE set, or one replica, it is not.
func TestReplicasNeedASharedStore(t *testing.T) {
	noEnv := func(string) string { return "" }
	got := storeFindings(roster.Member{Name: "worker", Replicas: 3}, noEnv)
	if len(got) != 1 || got[0].Code != CodeStoreReplicas || got[0].Member != "worker" ||
		!strings.Contains(got[0].Message, "replicas: 3") || !strings.Contains(got[0].Message, "store: postgres://") {
		t.Errorf("three replicas on SQLite: %+v; want one E-STORE-003 saying what to write", got)
	}
	if got := storeFindings(roster.Member{Name: "worker", Replicas: 1}, noEnv); len(got) != 0 {
		t.Errorf("one replica on SQLite: %+v; want nothing", got)
	}
}
