package member

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/member/stage"
)

// shellSession starts an agent whose one rule makes the given tool call and answers with the result
// exactly as the model received it.
func shellSession(t *testing.T, shell, call string) (*testSession, string) {
	t.Helper()
	return startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  shell: " + shell + "\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [" + call + "]\n      - say: '{{(index .results 0).text}}'\n",
	}, sessionOpts{confine: true})
}

func TestShellBinaryRunsByItsPath(t *testing.T) {
	s, _ := shellSession(t, "{allow: [expr]}", "{tool: expr, input: {args: ['2', '+', '3']}}")
	want := "<untrusted-content source=tool:expr>\nexit_code: 0\nstatus: ok\noutput_bytes: 2\noutput_shown: all\n\n5\n</untrusted-content>"
	if got := answer(s.run(t, "sum", Origin{})); got != want {
		t.Errorf("the model received:\n%s\nwant:\n%s", got, want)
	}
	if n := testutil.ToFloat64(s.cfg.Metrics.ToolCalls.WithLabelValues("expr", "ok")); n != 1 {
		t.Errorf("mur_tool_calls_total{tool=expr,status=ok} = %v, want 1", n)
	}
}

func TestShellFailureAndStdin(t *testing.T) {
	s, _ := shellSession(t, "{allow: [sh]}", `{tool: sh, input: {args: ['-c', 'cat; echo to-stderr >&2; exit 3'], stdin: 'from stdin'}}`)
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "exit_code: 3\nstatus: error\n") || !strings.Contains(got, "from stdinto-stderr\n") {
		t.Errorf("the model received:\n%s", got)
	}
	if n := testutil.ToFloat64(s.cfg.Metrics.ToolCalls.WithLabelValues("sh", "error")); n != 1 {
		t.Errorf("mur_tool_calls_total{tool=sh,status=error} = %v, want 1", n)
	}
}

func TestShellWritesOutsideTheWorkdirAreRefused(t *testing.T) {
	if !sandbox.LandlockAvailable() {
		t.Skip("this kernel does not enforce Landlock")
	}
	outside := filepath.Join(t.TempDir(), "escaped")
	s, root := shellSession(t, "{allow: [sh]}", `{tool: sh, input: {args: ['-c', 'echo inside > in.txt && echo out > `+outside+`']}}`)
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "Permission denied") || strings.Contains(got, "exit_code: 0") {
		t.Errorf("the write outside was not refused:\n%s", got)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("the command wrote outside its workdir")
	}
	if b, err := os.ReadFile(filepath.Join(root, "work", "in.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("a write inside the workdir: %q %v", b, err)
	}
}

func TestShellTimeLimit(t *testing.T) {
	s, _ := shellSession(t, "{allow: [sleep], timeout_secs: 1}", `{tool: sleep, input: {args: ['30']}}`)
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "status: error") || !strings.HasSuffix(got, "</untrusted-content>\n[sleep] The command was stopped by its time limit of 1s (capabilities.shell.timeout_secs).") {
		t.Errorf("the model received:\n%s", got)
	}
}

func TestShellOutputKeepsTheLastBytes(t *testing.T) {
	s, _ := shellSession(t, "{allow: [seq], output_kb: 1}", `{tool: seq, input: {args: ['1', '5000']}}`)
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "output_bytes: 23893\noutput_shown: last 1024 bytes\n") || !strings.HasSuffix(got, "4999\n5000\n</untrusted-content>") {
		t.Errorf("the model received:\n%.400s", got)
	}
}

func TestShellLeftoversAreKilled(t *testing.T) {
	host := sandbox.Probe()
	cgroupOnly := host
	cgroupOnly.PidNS = 0
	for _, tc := range []struct {
		name string
		iso  sandbox.Isolation
		note bool // the model is told leftovers held the output
		skip string
	}{
		// In a PID namespace the kernel kills the leftover the moment the command ends.
		{"PID namespace", sandbox.Isolation{PidNS: host.PidNS}, false, map[bool]string{true: "no PID namespace on this host"}[host.PidNS == 0]},
		// In a cgroup the runtime finds the leftover holding the output and kills it at once.
		{"cgroup", cgroupOnly, true, map[bool]string{true: "no cgroup v2 directory on this host"}[host.KillBase == ""]},
		// With the process group alone, the leftover gets lingerWait to let go, then the group is killed.
		{"process group", sandbox.Isolation{}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			s, root := startSession(t, map[string]string{
				"murmur.yaml": agentCapsule("capabilities:\n  shell: {allow: [sh]}\n"),
				"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: sh, input: {args: ['-c', 'sh -c \"" + gated("late") + "\" & echo started']}}]\n      - say: '{{(index .results 0).text}}'\n",
			}, sessionOpts{confine: true, isolate: func() sandbox.Isolation { return tc.iso }})
			got := answer(s.run(t, "x", Origin{}))
			if !strings.Contains(got, "exit_code: 0") || !strings.Contains(got, "started") {
				t.Errorf("the model received:\n%s", got)
			}
			note := strings.Contains(got, "[sh] Processes the command started still held its output after it exited; they were killed.")
			if note != tc.note {
				t.Errorf("note of the leftover: %v, want %v:\n%s", note, tc.note, got)
			}
			os.WriteFile(filepath.Join(root, "work", "go"), nil, 0o644)
			time.Sleep(1500 * time.Millisecond)
			if _, err := os.Stat(filepath.Join(root, "work", "late")); err == nil {
				t.Error("a process the command left behind ran on")
			}
		})
	}
}

func TestShellMemoryLimit(t *testing.T) {
	if sandbox.Probe().MemBase == "" {
		t.Skip("this host gives the runtime no memory cgroup: memory_mb is an address-space limit the runtime cannot attribute (W-SHELL-003)")
	}
	// dash keeps a command substitution's whole output in memory: 200 MB of it.
	const hog = `{tool: sh, input: {args: ['-c', 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo ${#x}']}}`
	for _, tc := range []struct {
		mb   int
		want string
	}{
		{32, "exit_code: 137\nstatus: error\n"},
		{1024, "exit_code: 0\nstatus: ok\noutput_bytes: 10\noutput_shown: all\n\n200000000\n</untrusted-content>"},
	} {
		t.Run(fmt.Sprint(tc.mb), func(t *testing.T) {
			s, _ := shellSession(t, fmt.Sprintf("{allow: [sh], memory_mb: %d}", tc.mb), hog)
			task := s.run(t, "x", Origin{})
			got := answer(task)
			note := fmt.Sprintf("\n[sh] The command was stopped by its memory limit of %d MB (capabilities.shell.memory_mb).", tc.mb)
			if !strings.Contains(got, tc.want) || strings.HasSuffix(got, note) != (tc.mb == 32) {
				t.Errorf("task %s (%q); the model received:\n%s", task.Status.State, status(task), got)
			}
		})
	}
}

func TestShellAllowlistBypassesStartNothing(t *testing.T) {
	for _, tc := range []struct{ name, call, want string }{
		{"PATH in the input", `{tool: ls, input: {args: ['.'], env: {PATH: '.'}}}`, `takes {"args": ["…"], "stdin": "…"} and nothing else`},
		{"a name with ..", `{tool: '../bin/sh', input: {args: ['-c', 'touch pwned']}}`, `no tool named "../bin/sh"`},
		{"env sh -c", `{tool: 'env sh -c', input: {args: ['touch pwned']}}`, `no tool named "env sh -c"`},
		{"a binary not allowed", `{tool: sh, input: {args: ['-c', 'touch pwned']}}`, `no tool named "sh"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := shellSession(t, "{allow: [ls]}", tc.call)
			got := answer(s.run(t, "x", Origin{}))
			if !strings.Contains(got, tc.want) {
				t.Errorf("the model received:\n%s\nwant it to say %q", got, tc.want)
			}
			if _, err := os.Stat(filepath.Join(root, "work", "pwned")); err == nil {
				t.Error("a process ran")
			}
		})
	}
	// A ./ls planted in the workdir is never what runs: the name was resolved on the trusted PATH.
	s, root := shellSession(t, "{allow: [ls]}", `{tool: ls, input: {args: ['-a']}}`)
	os.MkdirAll(filepath.Join(root, "work"), 0o755)
	os.WriteFile(filepath.Join(root, "work", "ls"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755)
	got := answer(s.run(t, "x", Origin{}))
	if !strings.Contains(got, "exit_code: 0") || !strings.Contains(got, "\nls\n") {
		t.Errorf("ls did not list the workdir:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(root, "work", "pwned")); err == nil {
		t.Error("the planted ./ls ran")
	}
}

func TestShellNameThatResolvesNowhereFailsStaging(t *testing.T) {
	c := &capsule.Capsule{Path: "/x/murmur.yaml", Inference: &capsule.Inference{Driver: "local", ChoiceOrder: []string{"local"}, Choices: map[string]capsule.Choice{"local": {Driver: "script"}}}}
	c.Capabilities.Shell.Allow = []string{"no-such-binary-anywhere"}
	found := false
	for _, f := range stage.Capsule(c, "m", func(string) string { return "" }) {
		if f.Code == stage.CodeShellMissing && strings.Contains(f.Message, "lists no-such-binary-anywhere, which is in none of /usr/local/bin, /usr/bin, /bin") {
			found = true
		}
	}
	if !found {
		t.Error("no E-SHELL-001 for a name on no trusted directory")
	}
	_ = a2a.TaskStateCompleted
}

// A command's exit code is its own, 128+N when signal N ended it, wherever it runs: in a PID namespace a
// command is not its PID 1, so a signal it sends itself ends it as it would anywhere.
func TestShellExitCodes(t *testing.T) {
	host := sandbox.Probe()
	noPIDNS := host
	noPIDNS.PidNS = 0
	for _, iso := range []struct {
		name string
		iso  func() sandbox.Isolation
		skip bool
	}{
		{"host default", nil, host.PidNS == 0},
		{"no PID namespace", func() sandbox.Isolation { return noPIDNS }, false},
		{"process group alone", func() sandbox.Isolation { return sandbox.Isolation{} }, false},
	} {
		for _, tc := range []struct{ command, want string }{
			{"exit 3", "exit_code: 3\nstatus: error\n"},
			{"echo fine", "exit_code: 0\nstatus: ok\n"},
			{"kill -TERM $$; sleep 5", "exit_code: 143\nstatus: error\n"},
			{"kill -KILL $$; sleep 5", "exit_code: 137\nstatus: error\n"},
		} {
			t.Run(iso.name+"/"+tc.command, func(t *testing.T) {
				if iso.skip {
					t.Skip("no PID namespace on this host")
				}
				s, _ := startSession(t, map[string]string{
					"murmur.yaml": agentCapsule("capabilities:\n  shell: {allow: [sh]}\n"),
					"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: sh, input: {args: ['-c', '" + tc.command + "']}}]\n      - say: '{{(index .results 0).text}}'\n",
				}, sessionOpts{confine: true, isolate: iso.iso})
				if got := answer(s.run(t, "x", Origin{})); !strings.Contains(got, tc.want) {
					t.Errorf("the model received:\n%s\nwant %q", got, tc.want)
				}
			})
		}
	}
}
