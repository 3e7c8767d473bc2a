package store_test

import (
	"path/filepath"
	"testing"

	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/storetest"
)

// TestSuite runs the task stores' behavioural suite against the SQLite store: a fresh file for each
// subtest, closed when it ends.
func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Tasks {
		s, err := store.Open(filepath.Join(t.TempDir(), "tasks.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	})
}
