package server

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/internal/pgtest"
)

// harnessDir is where the fake harness is built, once, for the tests that run it.
var harnessDir string

// Every test that starts a door, a session or a formation must leave no goroutine behind.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mur-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	harnessDir = dir
	code := pgtest.Main(m) // m.Run, then the test PostgreSQL stopped, when a test started it
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
