package server

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test that starts a door, a session or a formation must leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
