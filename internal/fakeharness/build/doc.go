// Package build builds the fake harness (internal/fakeharness) for tests: one binary per test process,
// in a directory the test's TestMain owns.
//
// It is for tests only; it runs the go command, so it must not be imported by anything a mur binary
// contains. FakeHarness is safe for concurrent use (it builds once).
package build
