package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/console"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// runningConsole is a console served in the background of mur run or mur console.
type runningConsole struct {
	loginURL string
	cancel   context.CancelFunc
	done     chan error
}

func (c *runningConsole) stop() error {
	c.cancel()
	return <-c.done
}

// checkConsoleAddr refuses a --console value that is no address before anything starts.
func checkConsoleAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--console %q: give an address such as 127.0.0.1:0 or 127.0.0.1:7100, or off", addr)
	}
	return nil
}

// startConsole serves the console of roster r, whose doors are at urls, on addr; traceURL is the trace
// UI's page of a trace (MUR_TRACE_URL), "" for none.
func startConsole(r *roster.Roster, urls map[string]string, addr, token, records, traceURL string, log *slog.Logger) (*runningConsole, error) {
	r2, err := r.WithURLs(urls)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c, err := console.New(console.Config{Roster: r2, Token: token, RecordsRoot: records, TraceURL: traceURL, Logger: log.With("part", "console")})
	if err != nil {
		return nil, err
	}
	ln, err := console.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("the console cannot listen on %s: %w (choose another with --console ADDR, or --console off)", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc := &runningConsole{loginURL: c.LoginURL("http://" + ln.Addr().String()), cancel: cancel, done: make(chan error, 1)}
	go func() { rc.done <- c.Serve(ctx, ln) }()
	return rc, nil
}

func cmdConsole(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("console", "mur console --roster FILE [--listen ADDR] [--door-urls NAME=URL,...] [--token T] [--records DIR]", stderr)
	path := fs.String("roster", "", "the formation's roster.yaml (required): its members, their doors and who may call whom")
	listen := fs.String("listen", "127.0.0.1:0", "where the console listens")
	doorURLs := fs.String("door-urls", getenv("MUR_DOOR_URLS"), doorURLsHelp)
	token := fs.String("token", getenv("MUR_OPERATOR_TOKEN"), "the operator token (env MUR_OPERATOR_TOKEN; default: read from the data directory beside the roster)")
	dataDirFlag := fs.String("data-dir", getenv("MUR_DATA_DIR"), "data directory holding operator.token (default .murmur/ beside the roster)")
	records := fs.String("records", "", "the records root whose sessions' trace.jsonl the task pages read (default: MUR_RECORDS_DIR, else ~/.murmur/records/<project path>); off when the records are not on this machine")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usagef("--roster is required: name the formation's roster.yaml")
	}
	if err := checkConsoleAddr(*listen); err != nil {
		return usagef("--listen %q: give an address such as 127.0.0.1:0 or 127.0.0.1:7100", *listen)
	}
	r, err := roster.Load(*path)
	if err != nil {
		return usageError{err}
	}
	if r, err = applyDoorURLs(r, *doorURLs); err != nil {
		return err
	}
	tok := *token
	if tok == "" {
		file := filepath.Join(dataDir(*dataDirFlag, r), server.OperatorTokenFile)
		b, err := os.ReadFile(file)
		if err != nil {
			return usagef("no operator token: set MUR_OPERATOR_TOKEN or --token (%v)", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	rec := *records
	switch rec {
	case "off":
		rec = ""
	case "":
		rec = recordsRoot(getenv, r)
	}
	c := common{logFormat: *logFormat, logLevel: "info"}
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}
	urls := map[string]string{}
	for _, m := range r.Members {
		urls[m.Name] = m.URL
	}
	con, err := startConsole(r, urls, *listen, tok, rec, getenv("MUR_TRACE_URL"), log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "console of formation %s (%d member(s)):\n  %s\n", r.Formation, len(r.Members), con.loginURL)
	if rec == "" {
		fmt.Fprintln(stdout, "  no records directory: task pages show what the doors say")
	}
	<-ctx.Done()
	err = con.stop()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
