// Command mur runs murmur formations: a set of agent members, each behind its own A2A 1.0 door.
//
// main only wires the process to run; everything else takes its inputs as arguments so tests can call it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/murmur-run/murmur/member/sandbox"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ConfineCommand {
		os.Exit(sandbox.ConfineMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks bad usage or bad configuration: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errHelp is returned after --help printed the usage: exit code 0.
var errHelp = errors.New("help shown")

// errReported is returned when the command already printed what went wrong.
type errReported struct{ code int }

func (e errReported) Error() string { return fmt.Sprintf("exit %d", e.code) }

func exitCode(err error, stderr *os.File) int {
	var rep errReported
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &rep):
		return rep.code
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "mur:", err)
		return 2
	}
	fmt.Fprintln(stderr, "mur:", err)
	return 1
}
