package runtimetools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type fakeBackground struct{ st BackgroundState }

func (f fakeBackground) Known(id string) bool          { return id == f.st.WorkID }
func (f fakeBackground) Status(string) BackgroundState { return f.st }
func (f fakeBackground) Stop(string) BackgroundState   { return f.st }
func (f fakeBackground) Wait(_ context.Context, _, _ string, secs int) BackgroundState {
	st := f.st
	w := int64(secs)
	st.WaitedSecs = &w
	return st
}

const wrk = "wrk_0199a3f1c2d47e8ab5c6d7e8f9a0b1c2"

func TestBackgroundCommandRefusals(t *testing.T) {
	rec := &memRecorder{}
	tool := &BackgroundCommand{Commands: fakeBackground{BackgroundState{WorkID: wrk}}, Recorder: rec}
	for _, tc := range []struct{ input, want string }{
		{`{"operation":"status","work_id":"wrk_00ff"}`, "no background command with work id `wrk_00ff` in this session"},
		{`{"operation":"status","work_id":"job-7"}`, "work_id `job-7` is not a work id: a work id has the form wrk_<hex>, as the shell call returned it"},
		{`{"operation":"status"}`, "background-command needs work_id: the wrk_<hex> id the shell call returned when its command moved to the background"},
		{`{"operation":"kill","work_id":"` + wrk + `"}`, "operation `kill` is not one of the accepted operations: status, wait, stop"},
		{`{"operation":"wait","work_id":"` + wrk + `","wait_secs":1.5}`, "wait_secs `1.5` is not a whole number of seconds"},
		{`{"operation":"wait","work_id":"` + wrk + `","wait_secs":"10"}`, "wait_secs `\"10\"` is not a whole number of seconds"},
		{`{"operation":"wait","work_id":"` + wrk + `","wait_secs":-1}`, "wait_secs `-1` is not a whole number of seconds"},
		{`{"operation":"wait","work_id":"` + wrk + `","wait_secs":1e400}`, "wait_secs `1e400` is not a whole number of seconds"},
	} {
		res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(tc.input)})
		if res.Status != StatusRefused || res.Output != tc.want {
			t.Errorf("%s: %s %q, want refused %q", tc.input, res.Status, res.Output, tc.want)
		}
	}
	if len(rec.recs) != 0 {
		t.Errorf("refused calls wrote %d records", len(rec.recs))
	}
}

func TestBackgroundCommandText(t *testing.T) {
	exited := BackgroundState{WorkID: wrk, State: "exited", ElapsedSecs: 312, ExitCode: 101, Status: "error",
		LogPath: "/r/logs/" + wrk + ".log", OutputBytes: 48213, Output: []byte("tail of it\n"), ShownLimit: 16384}
	rec := &memRecorder{}
	tool := &BackgroundCommand{Commands: fakeBackground{exited}, Recorder: rec}
	res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(`{"operation":"wait","work_id":"` + wrk + `","wait_secs":41}`)})
	want := "work_id: " + wrk + "\nstate: exited\nelapsed_secs: 312\nwaited_secs: 41\nexit_code: 101\nstatus: error\n" +
		"output: /r/logs/" + wrk + ".log\noutput_bytes: 48213\noutput_shown: last 16384 bytes\n\ntail of it\n"
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("wait text (-want +got):\n%s", diff)
	}
	if res.Status != StatusOK || len(rec.recs) != 1 || rec.recs[0]["type"] != "background_command" {
		t.Errorf("%s, records %v", res.Status, rec.recs)
	}
	// A whole number is whole however JSON writes it.
	for in, want := range map[string]string{"7.0": "waited_secs: 7\n", "5e1": "waited_secs: 50\n", "0.0": "waited_secs: 0\n"} {
		res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"operation":"wait","work_id":"` + wrk + `","wait_secs":` + in + `}`)})
		if res.Status != StatusOK || !strings.Contains(res.Output, want) {
			t.Errorf("wait_secs %s: %s\n%s", in, res.Status, res.Output)
		}
	}
	// Over the cap: taken as 600.
	res, _ = tool.Run(context.Background(), Call{Input: json.RawMessage(`{"operation":"wait","work_id":"` + wrk + `","wait_secs":9000}`)})
	if !strings.Contains(res.Output, "waited_secs: 600\n") {
		t.Errorf("wait_secs over the cap:\n%s", res.Output)
	}
	running := BackgroundState{WorkID: wrk, State: "running", ElapsedSecs: 5, LogPath: "/l", OutputBytes: 3, Output: []byte("abc"), ShownLimit: 16384}
	res, _ = (&BackgroundCommand{Commands: fakeBackground{running}, Recorder: rec}).Run(context.Background(),
		Call{Input: json.RawMessage(`{"operation":"status","work_id":"` + wrk + `"}`)})
	want = "work_id: " + wrk + "\nstate: running\nelapsed_secs: 5\noutput: /l\noutput_bytes: 3\noutput_shown: all\n\nabc"
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("status text of a running command (-want +got):\n%s", diff)
	}
	stopped := BackgroundState{WorkID: wrk, State: "stopped", ExitCode: 143, Status: "error", Limit: "its time limit", LogPath: "/l", ShownLimit: 16384}
	if note := BackgroundNote(stopped, "background-command"); note != "" {
		t.Errorf("a stopped command has no resource limit attributed, got note %q", note)
	}
}
