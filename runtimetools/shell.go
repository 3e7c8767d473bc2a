package runtimetools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// ShellRun is how one shell command ended.
type ShellRun struct {
	ExitCode    int    // 128 + signal for a signal kill
	Output      []byte // both streams in the order read: the last OutputLimit bytes of them
	OutputBytes int64  // all the bytes the command wrote
	Limit       string // the resource limit that stopped it, "" for none
	Lingering   bool   // processes it started still held its output after it exited
	// Moved is set when the command outlived lifecycle.shell_grace_secs and moved to the background;
	// Note then says so.
	Moved *BackgroundState
	Note  string
}

// ShellRunner is what a shell binary needs of the session: run one allowed binary, by its absolute
// path, in the session's workdir, with its limits.
type ShellRunner interface {
	RunShell(ctx context.Context, path, name string, args []string, stdin string) (ShellRun, error)
	// ShellAllowed checks the name against capabilities.shell.allow again, at dispatch.
	ShellAllowed(name string) bool
}

// Shell is the tool of one binary of capabilities.shell.allow, resolved at staging to Path.
type Shell struct {
	Name        string
	Path        string
	OutputLimit int
	Runner      ShellRunner
}

// ShellSchema is the input of every shell binary: the arguments as an array, optional stdin.
const ShellSchema = `{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"},"description":"the arguments, one string each; there is no shell, so nothing is split, globbed or expanded"},"stdin":{"type":"string","description":"text written to the command's standard input"}},"additionalProperties":false}`

// Manifest describes the binary.
func (t *Shell) Manifest() Manifest {
	return NativeManifest(t.Name, fmt.Sprintf(
		"Runs %s (%s) as a subprocess in this session's workdir, with the arguments given as an array (no shell) and optional stdin. "+
			"Returns the exit code, the status, and the output of both streams in the order read (the last %d bytes when longer).",
		t.Name, t.Path, t.OutputLimit), json.RawMessage(ShellSchema))
}

// Run checks the input strictly and runs the binary; a refused input starts no process.
func (t *Shell) Run(ctx context.Context, call Call) (Result, error) {
	if !t.Runner.ShellAllowed(t.Name) {
		return Refused(fmt.Sprintf("%s is not in capabilities.shell.allow; nothing was run.", t.Name)), nil
	}
	var in struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
	}
	input := call.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Refused(fmt.Sprintf("%s takes {\"args\": [\"…\"], \"stdin\": \"…\"} and nothing else (the runtime fixes PATH and the environment); nothing was run: %v", t.Name, err)), nil
	}
	run, err := t.Runner.RunShell(ctx, t.Path, t.Name, slices.Clone(in.Args), in.Stdin)
	if err != nil {
		// The runtime could not run it: a refusal, which carries no deadline notice (SPEC).
		return Refused(fmt.Sprintf("%s could not be run: %v", t.Name, err)), nil
	}
	if run.Moved != nil {
		return Result{Status: StatusOK, Output: RenderBackground(*run.Moved), Note: run.Note,
			Data: map[string]any{"work_id": run.Moved.WorkID, "state": run.Moved.State}}, nil
	}
	status := StatusOK
	if run.ExitCode != 0 || run.Limit != "" {
		status = StatusError
	}
	shown := "all"
	if run.OutputBytes > int64(len(run.Output)) {
		shown = fmt.Sprintf("last %d bytes", len(run.Output))
	}
	text := fmt.Sprintf("exit_code: %d\nstatus: %s\noutput_bytes: %d\noutput_shown: %s\n\n%s",
		run.ExitCode, status, run.OutputBytes, shown, run.Output)
	var note string
	if run.Limit != "" {
		note = fmt.Sprintf("[%s] The command was stopped by %s.", t.Name, run.Limit)
	}
	if run.Lingering {
		if note != "" {
			note += "\n"
		}
		note += fmt.Sprintf("[%s] Processes the command started still held its output after it exited; they were killed.", t.Name)
	}
	return Result{Status: status, Output: text, Note: note,
		Data: map[string]any{"exit_code": run.ExitCode, "status": status, "output_bytes": run.OutputBytes}}, nil
}
