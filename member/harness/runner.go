package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"

	"github.com/murmur-run/murmur/internal/kinderr"
)

// Placeholders a harness's command and resume arguments may hold; Run replaces each in every argument.
const (
	// PlaceholderPrompt is the prompt: the task text, or the continuation message on a resume. Without
	// it in any argument, the prompt is the last argument.
	PlaceholderPrompt = "{prompt}"
	// PlaceholderSession is the harness's own session id, from its stream (resume arguments).
	PlaceholderSession = "{session}"
	// PlaceholderMCPConfig is the path of the MCP config file naming the session's tool server.
	PlaceholderMCPConfig = "{mcp_config}"
	// PlaceholderInstructions is the system prompt the http loop would send the model: the capsule's
	// instructions, its skills and the plan guidance (for a flag such as Claude Code's
	// --append-system-prompt).
	PlaceholderInstructions = "{instructions}"
)

// EnvMCPConfig is the environment variable that also carries the MCP config file's path.
const EnvMCPConfig = "MUR_MCP_CONFIG"

// Program is one harness process to start: what the Starter needs to run it confined.
type Program struct {
	Command []string // the command as murmur.yaml writes it, placeholders replaced: Command[0] is resolved by the Starter
	Env     []string // NAME=value entries added to the clean environment every confined command gets
	Read    []string // paths it may read besides its workdir and the system directories
	Network bool     // whether it may reach the network
	Stdout  io.Writer
	Stderr  io.Writer
}

// Process is a started harness. Done is closed once it and everything it started are gone and its output
// has been read to the end; ExitCode is valid then (128+N for signal N).
type Process interface {
	Done() <-chan struct{}
	ExitCode() int
	// Kill ends its whole process tree; Done still closes afterwards.
	Kill()
}

// Starter starts a harness process under the session's confinement (the sandbox's runner). Its caller
// declares it here, so this package needs nothing of the sandbox.
type Starter interface {
	Start(p Program) (Process, error)
}

// Runner runs the harness of one capsule (murmur.yaml's harness: block).
type Runner struct {
	Command   []string
	Resume    []string
	Dialect   Dialect
	Env       []string // NAME=value, resolved (ResolveEnv)
	Read      []string
	Network   bool
	MCPConfig string // the MCP config file's path
	// Instructions is what PlaceholderInstructions stands for: the system prompt the http loop would
	// send (the capsule's instructions, its skills, the plan guidance).
	Instructions string
	Starter      Starter

	mu  sync.Mutex
	out *stdout // the running run's stdout, for Sync
}

// Sync returns once every event the running harness has written so far has been handed to its run's
// emit (nothing when no run is running). A tool call of the harness waits for it, so the turns the
// harness closed before calling are counted before the call is answered.
func (r *Runner) Sync() {
	r.mu.Lock()
	out := r.out
	r.mu.Unlock()
	if out != nil {
		out.Sync()
	}
}

// Result is what one run of the harness reported.
type Result struct {
	Session  string // the harness's session id, the latest the stream gave; "" none
	Answer   string
	Answered bool // an answer event came
	ExitCode int
	Events   int // events of the dialect read (garbage not counted)
	Garbage  int // lines that were not events
	Stderr   string
}

// stderrKept is how much of a harness's stderr a Result keeps: its end.
const stderrKept = 2 << 10

// ErrNoEvent, ErrExit, ErrNoAnswer and ErrReportedError classify a run that gave no usable answer;
// the error Run returns wraps one of them (errors.Is) and its text is one sentence saying what happened,
// fit for a task's status message.
var (
	ErrNoEvent       = errors.New("the harness reported no event")
	ErrExit          = errors.New("the harness failed")
	ErrNoAnswer      = errors.New("the harness gave no answer")
	ErrReportedError = errors.New("the harness reported an error")
)

// failed is a failed run: its sentence, and the class it belongs to.
func failed(class error, format string, args ...any) error {
	return kinderr.New(class, format, args...)
}

// Args returns the argument list of a run: Command, then Resume when session is not "", placeholders
// replaced; the prompt last unless an argument holds PlaceholderPrompt.
func (r *Runner) Args(prompt, session string) []string {
	args := append([]string(nil), r.Command...)
	if session != "" {
		args = append(args, r.Resume...)
	}
	placed := false
	rep := strings.NewReplacer(PlaceholderSession, session, PlaceholderMCPConfig, r.MCPConfig, PlaceholderInstructions, r.Instructions)
	for i, a := range args {
		if strings.Contains(a, PlaceholderPrompt) {
			placed = true
			a = strings.ReplaceAll(a, PlaceholderPrompt, prompt)
		}
		args[i] = rep.Replace(a)
	}
	if !placed {
		args = append(args, prompt)
	}
	return args
}

// Run starts the harness with prompt (resuming session when it is not ""), hands every event of its
// stdout to emit in order, and returns once the harness and everything it started are gone. When ctx
// ends first, the whole tree is killed and ctx's error returned. A run that gives no answer returns an
// error wrapping ErrNoEvent, ErrExit, ErrNoAnswer or ErrReportedError, with the Result so far.
func (r *Runner) Run(ctx context.Context, prompt, session string, emit func(Event)) (Result, error) {
	var res Result
	if err := ctx.Err(); err != nil {
		return res, err
	}
	var reportedErr bool
	// The events are accounted for on the parser's goroutine, each before the next chunk of the stream
	// is read, so that Sync can make a tool call wait for them; res is read once the parser is done.
	out := newStdout(r.Dialect, func(e Event) {
		if e.Kind == KindGarbage {
			res.Garbage++
		} else {
			res.Events++
		}
		switch e.Kind {
		case KindSession:
			res.Session = e.Session
		case KindAnswer:
			res.Answer, res.Answered, reportedErr = e.Text, true, e.IsError
			if e.Session != "" {
				res.Session = e.Session
			}
		}
		if emit != nil {
			emit(e)
		}
	})
	r.mu.Lock()
	r.out = out
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.out = nil
		r.mu.Unlock()
	}()
	stderr := &tailBuffer{max: stderrKept}
	env := append([]string{EnvMCPConfig + "=" + r.MCPConfig}, withoutTraceEnv(r.Env)...)
	env = append(env, traceEnv(ctx)...) // the task's trace, for a harness that traces
	p, err := r.Starter.Start(Program{Command: r.Args(prompt, session), Env: env, Read: r.Read, Network: r.Network, Stdout: out, Stderr: stderr})
	if err != nil {
		out.Close()
		<-out.done
		return Result{}, fmt.Errorf("starting the harness %s: %w", r.Command[0], err)
	}
	go func() {
		select {
		case <-p.Done():
		case <-ctx.Done():
			p.Kill()
			<-p.Done()
		}
		out.Close()
	}()
	<-out.done
	<-p.Done()
	res.ExitCode = p.ExitCode()
	res.Stderr = stderr.String()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	switch {
	case res.ExitCode > 128 && res.ExitCode < 128+65:
		return res, failed(ErrExit, "the harness %s was killed by signal %d (%s)%s%s", r.Command[0],
			res.ExitCode-128, syscall.Signal(res.ExitCode-128), r.sinceEvents(res), stderrTail(res.Stderr))
	case res.ExitCode != 0 && res.Events == 0:
		return res, failed(ErrNoEvent, "the harness %s exited with status %d before reporting any event%s%s",
			r.Command[0], res.ExitCode, r.garbageSaid(res), stderrTail(res.Stderr))
	case reportedErr:
		return res, failed(ErrReportedError, "the harness reported an error: %s", oneLine(res.Answer))
	case res.ExitCode != 0:
		return res, failed(ErrExit, "the harness %s exited with status %d%s%s", r.Command[0], res.ExitCode,
			r.sinceEvents(res), stderrTail(res.Stderr))
	case !res.Answered:
		return res, failed(ErrNoAnswer, "the harness %s exited without an answer event (dialect %s)%s%s",
			r.Command[0], r.Dialect, r.garbageSaid(res), stderrTail(res.Stderr))
	}
	return res, nil
}

func (r *Runner) sinceEvents(res Result) string {
	if res.Events == 0 {
		return " before reporting any event" + r.garbageSaid(res)
	}
	return fmt.Sprintf(" after %d event(s)", res.Events)
}

func (r *Runner) garbageSaid(res Result) string {
	if res.Garbage == 0 {
		return ""
	}
	return fmt.Sprintf("; %d line(s) of its output were not %s events", res.Garbage, r.Dialect)
}

func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "; its stderr ends: " + oneLine(s)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// ResolveEnv turns harness.env's entries into NAME=value: NAME=value stands as written; a bare NAME
// takes mur's own value from getenv, and is left out when mur has none.
func ResolveEnv(entries []string, getenv func(string) string) []string {
	var out []string
	for _, e := range entries {
		if strings.Contains(e, "=") {
			out = append(out, e)
			continue
		}
		if v := getenv(e); v != "" {
			out = append(out, e+"="+v)
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
