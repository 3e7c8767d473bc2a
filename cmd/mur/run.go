package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/stage"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `mur runs formations of AI agents: members listed in a roster.yaml, each behind its own A2A 1.0 door.

Usage:
  mur init [DIR]                     write a formation of two members that runs offline into DIR (default .)
  mur run --roster FILE              start every member of the formation (one process, doors on loopback)
                                     and its console (--console ADDR, default 127.0.0.1:0; off to disable)
  mur member --roster FILE --name N  run one member (what each container of a compose formation runs)
  mur check --roster FILE            validate every file and print every error and warning
  mur check --capsule DIR            the same for one capsule outside a formation
  mur console --roster FILE          serve the console of a formation that runs elsewhere
  mur send [--roster FILE [--member N] | --door URL] [--wait | --follow] [--save DIR] TEXT
                                     send a task (to the entry member by default); --wait prints its
                                     answer, --follow its progress too, --save saves its files
  mur get [--roster FILE | --door URL] [--follow] [--save DIR] TASK
                                     show a task: its state, answer and artifacts
  mur cancel [--roster FILE | --door URL] [--tree] TASK
                                     cancel a task; --tree also the tasks it gave other members
  mur tasks [--roster FILE [--member N] | --door URL]
                                     list a member's tasks
  mur export compose|k8s|prometheus --roster FILE
                                     write a compose file, Kubernetes manifests or a scrape config
  mur pull --capsule DIR [--roster FILE] scope/name[@version]
                                     pin an artifact from the stores in the capsule's murmur.lock
  mur list [--capsule DIR]           list the artifacts the capsule's murmur.lock pins
  mur health [--door URL]            exit 0 when the door is ready (the image's health check)
  mur version                        print the version

Run "mur COMMAND --help" for a command's flags. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or
bad configuration, 3 the task waits for your input (mur send --wait or --follow, mur get --follow).
`

// command is one of mur's commands: each is given the same arguments and uses those it needs.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// commands is the table of mur's commands, by the name that runs them.
func commands() map[string]command {
	noContext := func(f func([]string, func(string) string, io.Writer, io.Writer) error) command {
		return func(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
			return f(args, getenv, stdout, stderr)
		}
	}
	return map[string]command{
		"run": cmdRun, "member": cmdMember, "check": noContext(cmdCheck), "console": cmdConsole,
		"send": cmdSend, "tasks": cmdTasks, "get": cmdGet, "cancel": cmdCancel, "init": cmdInit,
		"export": noContext(cmdExport), "pull": cmdPull,
		"list": noContext(func(args []string, _ func(string) string, stdout, stderr io.Writer) error {
			return cmdList(args, stdout, stderr)
		}),
		"health": cmdHealth,
	}
}

// run is the whole program; main only calls it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	if f, ok := commands()[cmd]; ok {
		return f(ctx, rest, getenv, stdout, stderr)
	}
	switch cmd {
	case "version", "--version":
		fmt.Fprintln(stdout, "mur", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", cmd)
}

// newFlags returns a flag set that reports errors as usage errors and --help as errHelp.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usageError{err}
	}
	return nil
}

// common are the flags of the commands that start members.
type common struct {
	roster     string
	dataDir    string
	logFormat  string
	logLevel   string
	maxBody    int64
	maxStreams int
	doorURLs   string
	debug      string        // --debug-listen: where net/http/pprof is served; "" for nowhere
	replica    string        // mur member's --replica (MUR_REPLICA): its name among the member's replicas
	lease      time.Duration // mur member's MUR_LEASE: a replica's lease; 0 for the default
}

func (c *common) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.roster, "roster", "", "the formation's roster.yaml (required)")
	fs.StringVar(&c.dataDir, "data-dir", getenv("MUR_DATA_DIR"), "data directory: tokens, task stores, workdirs (default .murmur/ beside the roster; env MUR_DATA_DIR)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.Int64Var(&c.maxBody, "max-body", server.DefaultMaxBody, "largest JSON-RPC request body a door accepts, in bytes")
	fs.IntVar(&c.maxStreams, "max-streams", server.DefaultMaxStreams, "most streams (SendStreamingMessage, SubscribeToTask) one caller, the operator or a peer member, may hold open on a door at once")
	fs.StringVar(&c.doorURLs, "door-urls", getenv("MUR_DOOR_URLS"), doorURLsHelp)
	fs.StringVar(&c.debug, "debug-listen", "", "serve Go's profiles (net/http/pprof) at this loopback address, such as 127.0.0.1:6060 (default off)")
}

func (c *common) logger(stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: use text or json", c.logFormat)
}

// loadRoster loads the roster, applies --door-urls, and stages every member (or only those named),
// printing every finding. Any error is a configuration error. It returns the capsules staging loaded, by
// directory, for the formation to start on (server.FormationConfig's Capsules).
func loadRoster(path, doorURLs string, only []string, getenv func(string) string, stderr io.Writer) (*roster.Roster, map[string]*capsule.Capsule, error) {
	if path == "" {
		return nil, nil, usagef("--roster is required: name the formation's roster.yaml")
	}
	r, err := roster.Load(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if r, err = applyDoorURLs(r, doorURLs); err != nil {
		return nil, nil, err
	}
	findings, capsules := stage.FormationCapsules(r, only, getenv)
	bad := false
	for _, f := range findings {
		fmt.Fprintln(stderr, f)
		bad = bad || f.IsError()
	}
	if bad {
		return nil, nil, usagef("%s: staging failed; fix the errors above (mur check --roster %s lists them)", path, path)
	}
	return r, capsules, nil
}

func dataDir(flagValue string, r *roster.Roster) string {
	if flagValue != "" {
		if abs, err := filepath.Abs(flagValue); err == nil {
			return abs
		}
		return flagValue
	}
	return filepath.Join(r.Dir, ".murmur")
}

// recordsRoot is ~/.murmur/records/<project path> (DESIGN §6), or MUR_RECORDS_DIR when set.
func recordsRoot(getenv func(string) string, r *roster.Roster) string {
	if d := getenv("MUR_RECORDS_DIR"); d != "" {
		return d
	}
	home := getenv("HOME")
	if home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".murmur", "records", strings.TrimPrefix(r.Dir, string(filepath.Separator)))
}

func cmdRun(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "mur run --roster FILE [flags]", stderr)
	var c common
	c.register(fs, getenv)
	consoleAddr := fs.String("console", "127.0.0.1:0", "where the formation console listens (printed with its one-time login URL); off for no console")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *consoleAddr != "off" {
		if err := checkConsoleAddr(*consoleAddr); err != nil {
			return err
		}
	}
	return serve(ctx, c, nil, "", *consoleAddr, getenv, stdout, stderr)
}

func cmdMember(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("member", "mur member --roster FILE --name NAME [flags]", stderr)
	var c common
	c.register(fs, getenv)
	name := fs.String("name", getenv("MUR_MEMBER"), "the member to run (env MUR_MEMBER)")
	listen := fs.String("listen", getenv("MUR_LISTEN"), "where the door listens, overriding roster.yaml (env MUR_LISTEN)")
	fs.StringVar(&c.replica, "replica", getenv("MUR_REPLICA"), "this process's name among the member's replicas (env MUR_REPLICA; default: the host's name when the roster says replicas: above 1)")
	lease := getenv("MUR_LEASE")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usagef("--name is required: name the member of the roster to run")
	}
	if lease != "" {
		d, err := time.ParseDuration(lease)
		if err != nil || d < time.Second {
			return usagef("MUR_LEASE=%q: give a replica's lease as a duration of 1s or more, such as 10s", lease)
		}
		c.lease = d
	}
	return serve(ctx, c, []string{*name}, *listen, "off", getenv, stdout, stderr)
}

func cmdCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "mur check --roster FILE [--door-urls NAME=URL,...] | mur check --capsule DIR", stderr)
	path := fs.String("roster", "", "the formation's roster.yaml")
	capsuleDir := fs.String("capsule", "", "check one capsule directory outside a formation instead (its project store beside it)")
	doorURLs := fs.String("door-urls", getenv("MUR_DOOR_URLS"), doorURLsHelp+"; checks the formation as its containers see it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *capsuleDir != "" && *path != "" {
		return usagef("name either --roster or --capsule, not both")
	}
	if *capsuleDir != "" {
		_, findings := stage.CapsuleDir(*capsuleDir, getenv)
		return report(stdout, findings, fmt.Sprintf("%s: 1 capsule", *capsuleDir))
	}
	if *path == "" {
		return usagef("--roster is required: name the formation's roster.yaml (or check one capsule with --capsule DIR)")
	}
	r, err := roster.Load(*path)
	if err != nil {
		fmt.Fprintln(stdout, err)
		return errReported{2}
	}
	if r, err = applyDoorURLs(r, *doorURLs); err != nil {
		return err
	}
	return report(stdout, stage.Formation(r, nil, getenv), fmt.Sprintf("%s: %d member(s)", r.Path, len(r.Members)))
}

// report prints findings and the summary line; errors exit 2.
func report(stdout io.Writer, findings []stage.Finding, what string) error {
	errs := 0
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
		if f.IsError() {
			errs++
		}
	}
	fmt.Fprintf(stdout, "%s, %d error(s), %d warning(s)\n", what, errs, len(findings)-errs)
	if errs > 0 {
		return errReported{2}
	}
	return nil
}
