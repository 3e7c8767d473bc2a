package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets a test run this very binary as mur (MUR_TEST_AS_MUR=1), so the crash test can start
// and SIGKILL a real member process without building anything.
func TestMain(m *testing.M) {
	if os.Getenv("MUR_TEST_AS_MUR") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}
