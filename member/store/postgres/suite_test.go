package postgres

import (
	"testing"

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
