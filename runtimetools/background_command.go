package runtimetools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/murmur-run/murmur/member/records"
)

// BackgroundState is what background-command reports of one command (SPEC "background-command").
type BackgroundState struct {
	WorkID      string
	State       string // running, exited, stopped
	ElapsedSecs int64
	WaitedSecs  *int64 // wait only
	// Canceled marks a wait that a cancel of the task ended: its record carries phase background_wait.
	Canceled    bool
	ExitCode    int    // exited and stopped
	Status      string // ok or error, exited and stopped
	WaitError   string
	LogPath     string
	OutputBytes int64
	Output      []byte // the last ShownLimit bytes
	ShownLimit  int
	Limit       string // a resource limit that stopped it; never for a stopped command
	Lingering   bool
}

// Background is what background-command needs of the session.
type Background interface {
	// Known reports whether this session issued the work id.
	Known(workID string) bool
	Status(workID string) BackgroundState
	// Wait waits up to secs for the command to exit; a cancel of ctx (the task) ends it at once.
	Wait(ctx context.Context, task, workID string, secs int) BackgroundState
	Stop(workID string) BackgroundState
}

// BackgroundCommand is the background-command tool.
type BackgroundCommand struct {
	Commands Background
	Recorder Recorder
}

// The bounds of wait.
const (
	DefaultWaitSecs = 600
	MaxWaitSecs     = 600
)

var workIDForm = regexp.MustCompile(`^wrk_[0-9a-f]+$`)

// Manifest is SPEC's schema.
func (t *BackgroundCommand) Manifest() Manifest {
	return NativeManifest("background-command",
		"Reports on, waits for or stops a shell command that moved to the background, by the work id (wrk_…) its shell call returned. "+
			"status returns at once; wait returns when the command exits or after wait_secs (default and most 600; 0 returns at once); "+
			"stop sends SIGTERM to the command's process group, SIGKILL 2 seconds later, then waits up to 3 seconds more.",
		json.RawMessage(`{"type":"object","properties":{"operation":{"type":"string","enum":["status","wait","stop"]},"work_id":{"type":"string"},"wait_secs":{"type":"integer","minimum":0}},"required":["operation","work_id"]}`))
}

// Run answers one operation, or refuses its input (writing no record).
func (t *BackgroundCommand) Run(ctx context.Context, call Call) (Result, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(call.Input, &in); err != nil {
		in = map[string]json.RawMessage{}
	}
	str := func(k string) (string, bool) {
		raw, ok := in[k]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return string(raw), true
		}
		return s, true
	}
	id, ok := str("work_id")
	if !ok || id == "" {
		return Refused("background-command needs work_id: the wrk_<hex> id the shell call returned when its command moved to the background"), nil
	}
	if !workIDForm.MatchString(id) {
		return Refused(fmt.Sprintf("work_id `%s` is not a work id: a work id has the form wrk_<hex>, as the shell call returned it", id)), nil
	}
	op, _ := str("operation")
	if op != "status" && op != "wait" && op != "stop" {
		return Refused(fmt.Sprintf("operation `%s` is not one of the accepted operations: status, wait, stop", op)), nil
	}
	secs := DefaultWaitSecs
	if raw, ok := in["wait_secs"]; ok {
		// A JSON number with no fraction is a whole number however it is written: 5, 5.0, 5e0.
		num := bytes.TrimSpace(raw)
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || !json.Valid(num) || len(num) == 0 || (num[0] != '-' && (num[0] < '0' || num[0] > '9')) || f < 0 || f != math.Trunc(f) {
			return Refused(fmt.Sprintf("wait_secs `%s` is not a whole number of seconds", bytes.TrimSpace(raw))), nil
		}
		secs = int(min(f, MaxWaitSecs))
	}
	if !t.Commands.Known(id) {
		return Refused(fmt.Sprintf("no background command with work id `%s` in this session", id)), nil
	}
	var st BackgroundState
	switch op {
	case "status":
		st = t.Commands.Status(id)
	case "wait":
		st = t.Commands.Wait(ctx, call.Task, id, secs)
	case "stop":
		st = t.Commands.Stop(id)
	}
	text := RenderBackground(st)
	rec := map[string]any{"operation": op, "work_id": id, "state": st.State, "elapsed_secs": st.ElapsedSecs, "output_bytes": st.OutputBytes}
	if st.State != "running" {
		rec["exit_code"] = st.ExitCode
	}
	if st.WaitedSecs != nil {
		rec["waited_secs"] = *st.WaitedSecs
	}
	if st.Canceled {
		rec["phase"], rec["canceled"] = "background_wait", true
	}
	// The one record of the call, whatever ended it: Wait writes none of its own.
	if err := t.Recorder.Write(records.TypeBackgroundCommand, call.Task, rec); err != nil {
		return Result{}, err
	}
	return Result{Status: StatusOK, Output: text, Note: BackgroundNote(st, "background-command"), Data: rec}, nil
}

// RenderBackground is SPEC's text: its lines in its order, each present exactly when SPEC's table says,
// the blank line, and the last bytes of the output.
func RenderBackground(st BackgroundState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "work_id: %s\nstate: %s\nelapsed_secs: %d\n", st.WorkID, st.State, st.ElapsedSecs)
	if st.WaitedSecs != nil {
		fmt.Fprintf(&b, "waited_secs: %d\n", *st.WaitedSecs)
	}
	if st.State == "exited" || st.State == "stopped" {
		fmt.Fprintf(&b, "exit_code: %d\nstatus: %s\n", st.ExitCode, st.Status)
	}
	if st.WaitError != "" {
		fmt.Fprintf(&b, "wait_error: %s\n", st.WaitError)
	}
	shown := "all"
	if st.OutputBytes > int64(len(st.Output)) {
		shown = fmt.Sprintf("last %d bytes", st.ShownLimit)
	}
	fmt.Fprintf(&b, "output: %s\noutput_bytes: %d\noutput_shown: %s\n\n", st.LogPath, st.OutputBytes, shown)
	b.Write(st.Output)
	return b.String()
}

// BackgroundNote is the runtime's note after the fence: the resource limit that stopped the command,
// and processes left holding its output.
func BackgroundNote(st BackgroundState, tool string) string {
	var notes []string
	if st.Limit != "" && st.State != "stopped" {
		notes = append(notes, fmt.Sprintf("[%s] The command was stopped by %s.", tool, st.Limit))
	}
	if st.Lingering {
		notes = append(notes, fmt.Sprintf("[%s] Processes the command started still held its output after it exited; they were killed.", tool))
	}
	return strings.Join(notes, "\n")
}
