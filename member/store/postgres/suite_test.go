package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/storetest"
)

// TestSuite runs the behavioural suite of every task store against this one, each subtest on a fresh
// database.
func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Tasks {
		s, _ := open(t, Config{})
		return s
	})
}

// TestSuiteReplica runs the suite against a replica's store (Config.Replica): a replica owns the tasks
// it creates, so the suite's writes are its own, and it must behave as a store of one process does.
// Only Recover differs, by design (it ends only the replica's running tasks and releases its
// submitted ones): TestReplicaRecover checks it.
func TestSuiteReplica(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Tasks {
		s, _ := open(t, Config{Replica: "r1"})
		return replicaSuite{s, t}
	})
}

// replicaSuite is a replica's store for the suite, whose Recover skips the subtest calling it.
type replicaSuite struct {
	*Store
	t *testing.T
}

func (r replicaSuite) Recover(context.Context, time.Time) ([]a2a.TaskID, error) {
	r.t.Skip("a replica's Recover ends only its own running tasks and releases its submitted ones: TestReplicaRecover checks it")
	return nil, nil
}
