package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member/sandbox"
)

// TestMain lets a test run this very binary as mur (MUR_TEST_AS_MUR=1), so the crash test can start
// and SIGKILL a real member process without building anything; such a member runs its commands through
// this binary too, as the confining helper.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ConfineCommand {
		os.Exit(sandbox.ConfineMain(os.Args[2:]))
	}
	if os.Getenv("MUR_TEST_AS_MUR") == "1" {
		main()
		return
	}
	code := pgtest.Main(m) // m.Run, then the test PostgreSQL stopped, when a test started it
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
