package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// shutdownTimeout bounds the shutdown of a formation's doors.
const shutdownTimeout = 15 * time.Second

// serve runs the members of the roster (only those named in only, when it names any) until ctx ends or
// a door fails: mur run's and mur member's work. It checks the flags, starts the formation and what
// runs beside it, prints where each is, and shuts them down in turn.
func serve(ctx context.Context, c common, only []string, listen, consoleAddr string, getenv func(string) string, stdout, stderr io.Writer) error {
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}
	if err := c.checkServe(); err != nil {
		return err
	}
	r, capsules, err := loadRoster(c.roster, c.doorURLs, only, getenv, stderr)
	if err != nil {
		return err
	}
	if len(only) == 1 {
		if _, ok := r.Member(only[0]); !ok {
			return usagef("%s: no member named %q; the members are %s", r.Path, only[0], strings.Join(r.Names(), ", "))
		}
	}
	dir := dataDir(c.dataDir, r)
	tokens, err := server.LoadTokens(dir, getenv)
	if err != nil {
		return err
	}
	helper, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding mur's own executable, which confines shell commands: %w", err)
	}
	tracing, err := startTracing(ctx, only, getenv, log)
	if err != nil {
		return err
	}
	defer stopTracing(tracing, log) // after the members: the spans of their last tasks go out too
	f, err := server.StartFormation(server.FormationConfig{
		Roster: r, Capsules: capsules, Only: only, DataDir: dir, RecordsRoot: recordsRoot(getenv, r), Tokens: tokens,
		Listen: listen, MaxBody: c.maxBody, MaxStreams: c.maxStreams, Version: version, Logger: log, ConfineHelper: helper,
		ControlToken: getenv("MUR_CONTROL_TOKEN"), Store: getenv("MUR_STORE"), Getenv: getenv,
		Replica: c.replica, Lease: c.lease, TracerProvider: tracing.TracerProvider(),
	})
	if err != nil {
		return err
	}
	side, err := startSidecars(c, r, f, consoleAddr, tokens.Operator, getenv, log)
	if err != nil {
		return errors.Join(err, shutdown(f))
	}
	printReady(stdout, c, r, f, side, dir, getenv)
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case serveErr = <-f.Err():
		log.Error("a door failed; shutting down", "err", serveErr)
	}
	return errors.Join(serveErr, side.stop(), shutdown(f))
}

// checkServe refuses, before anything starts, the flags of c that serve cannot use.
func (c *common) checkServe() error {
	if c.maxStreams < 1 {
		return usagef("--max-streams %d: give how many streams one caller may hold open on a door, 1 or more (default %d)", c.maxStreams, server.DefaultMaxStreams)
	}
	if c.debug != "" {
		return checkDebugAddr(c.debug)
	}
	return nil
}

// shutdown shuts the formation's doors down, within shutdownTimeout.
func shutdown(f *server.Formation) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return f.Shutdown(ctx)
}

// sidecars is what serve runs beside the formation's doors: the console and Go's profiles, each nil
// when off.
type sidecars struct {
	console *runningConsole
	debug   *debugServer
}

// startSidecars starts the console on consoleAddr (unless it is "off"), reading the doors at the URLs
// they got (port 0 gets a real port), and the profiles at c.debug (when set). When one cannot start, the
// one started already is stopped.
func startSidecars(c common, r *roster.Roster, f *server.Formation, consoleAddr, operatorToken string, getenv func(string) string, log *slog.Logger) (sidecars, error) {
	var side sidecars
	if consoleAddr != "off" {
		urls := map[string]string{}
		for _, m := range f.Members {
			urls[m.Name] = m.URL
		}
		con, err := startConsole(r, urls, consoleAddr, operatorToken, recordsRoot(getenv, r), getenv("MUR_TRACE_URL"), log)
		if err != nil {
			return side, err
		}
		side.console = con
	}
	if c.debug != "" {
		debug, err := startDebug(c.debug, log)
		if err != nil {
			return sidecars{}, errors.Join(err, side.stop())
		}
		side.debug = debug
	}
	return side, nil
}

// stop stops what runs.
func (s sidecars) stop() error {
	var err error
	if s.console != nil {
		err = s.console.stop()
	}
	return errors.Join(err, s.debug.stop())
}

// printReady prints where the formation's doors and sidecars are, and how to send the entry member a
// first task.
func printReady(stdout io.Writer, c common, r *roster.Roster, f *server.Formation, side sidecars, dir string, getenv func(string) string) {
	fmt.Fprintf(stdout, "formation %s: %d member(s) ready\n", r.Formation, len(f.Members))
	for _, m := range f.Members {
		fmt.Fprintf(stdout, "  %-12s %s/a2a\n", m.Name, m.URL)
	}
	if side.console != nil {
		fmt.Fprintf(stdout, "  %-12s %s\n", "console", side.console.loginURL)
	}
	if side.debug != nil {
		fmt.Fprintf(stdout, "  %-12s %s\n", "profiles", side.debug.url)
	}
	tokenRef := "$MUR_OPERATOR_TOKEN"
	if getenv("MUR_OPERATOR_TOKEN") == "" {
		tokenRef = "$(cat " + filepath.Join(dir, server.OperatorTokenFile) + ")"
	}
	first := f.Members[0]
	for _, m := range f.Members {
		if m.Name == r.Entry {
			first = m
		}
	}
	fmt.Fprintf(stdout, "\ntry:\n  %s\n", sendHint(c, r, first.Name, first.URL, tokenRef, getenv))
	fmt.Fprintf(stdout, "  curl -s %s/a2a -H \"Authorization: Bearer %s\" -H 'Content-Type: application/json' \\\n"+
		"    -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"hello\"}]}}}'\n\n",
		first.URL, tokenRef)
}
