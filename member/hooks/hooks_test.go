package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/member/records"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a hook whose program is a real shell script, run as a subprocess; it also writes the input
// it was given to a file beside it, so a test can read what the hook was told.
func script(t *testing.T, name, body string, events ...string) (Hook, string) {
	t.Helper()
	dir := t.TempDir()
	seen := filepath.Join(dir, "input.json")
	prog := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ncat > "+seen+"\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := RunnerFunc(func(ctx context.Context, call Call) ([]byte, error) {
		limit := call.Limit
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, prog)
		cmd.Stdin, cmd.Stdout, cmd.WaitDelay = bytes.NewReader(call.Input), &out, time.Second
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("it ended with %v", err)
		}
		if out.Len() > limit {
			return nil, fmt.Errorf("it wrote more than %d bytes", limit)
		}
		return out.Bytes(), nil
	})
	return Hook{Name: name, Events: events, Runner: run}, seen
}

type recorder struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (r *recorder) Write(typ records.Type, task string, fields map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := map[string]any{"type": string(typ), "task": task}
	for k, v := range fields {
		rec[k] = v
	}
	r.recs = append(r.recs, rec)
	return nil
}

func TestToolCallDecisions(t *testing.T) {
	call := ToolCall{Tool: "cat", Input: json.RawMessage(`{"args":["/etc/passwd"]}`), Task: "tsk_1", Trust: "untrusted"}
	for _, tc := range []struct {
		name   string
		body   string
		allow  bool
		reason string
		failed bool
	}{
		{"allow", `echo '{"decision": "allow"}'`, true, "", false},
		{"deny", `echo '{"decision": "deny", "reason": "no reading /etc"}'`, false, "no reading /etc", false},
		{"deny without a reason", `echo '{"decision": "deny"}'`, false, "no reason given", false},
		{"exit 3", `exit 3`, false, "the hook failed, which denies: it ended with exit status 3", true},
		{"not JSON", `echo 'yes'`, false, `the hook failed, which denies: its answer is not the JSON object a hook writes: invalid character 'y' looking for beginning of value (it wrote "yes\n")`, true},
		{"no decision", `echo '{}'`, false, `the hook failed, which denies: its answer has no decision; a hook answers {"decision": "allow" | "deny" | "ask", "reason": "…"}`, true},
		{"another decision", `echo '{"decision": "maybe"}'`, false, `the hook failed, which denies: its decision "maybe" is none of "allow", "deny" and "ask"`, true},
		{"a misspelt key", `echo '{"decison": "allow"}'`, false, `the hook failed, which denies: its answer is not the JSON object a hook writes: json: unknown field "decison" (it wrote "{\"decison\": \"allow\"}\n")`, true},
		{"two values", `echo '{"decision": "allow"} {"decision": "deny"}'`, false, `the hook failed, which denies: it wrote more than one JSON value ("{\"decision\": \"allow\"} {\"decision\": \"deny\"}\n")`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, seen := script(t, "local/policy", tc.body, EventToolCall)
			rec := &recorder{}
			s, err := New(Config{Hooks: []Hook{h}, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			d := s.CheckToolCall(context.Background(), call)
			if d.Allow != tc.allow || d.Reason != tc.reason || d.Failed != tc.failed {
				t.Errorf("decision %+v, want allow %v reason %q failed %v", d, tc.allow, tc.reason, tc.failed)
			}
			told, _ := os.ReadFile(seen)
			if want := `{"event":"on-tool-call","tool":"cat","input":{"args":["/etc/passwd"]},"task":"tsk_1","trust":"untrusted"}`; string(told) != want {
				t.Errorf("the hook was told %s\nwant %s", told, want)
			}
			var types []string
			for _, r := range rec.recs {
				types = append(types, r["type"].(string))
			}
			want := []string{}
			if tc.failed {
				want = append(want, "hook_failed")
			}
			if !tc.allow {
				want = append(want, "tool_denied")
				if got := d.Refusal(); got != "denied by policy local/policy: "+tc.reason {
					t.Errorf("refusal %q", got)
				}
			}
			if diff := cmp.Diff(want, append([]string{}, types...)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolCallOrderAndTimeout(t *testing.T) {
	allow, _ := script(t, "local/a", `echo '{"decision": "allow"}'`, EventToolCall)
	slow, _ := script(t, "local/slow", `exec sleep 60`, EventToolCall)
	deny, denySeen := script(t, "local/never", `echo '{"decision": "deny", "reason": "x"}'`, EventToolCall)
	rec := &recorder{}
	s, err := New(Config{Hooks: []Hook{allow, slow, deny}, Timeout: 200 * time.Millisecond, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	d := s.CheckToolCall(context.Background(), ToolCall{Tool: "pull-artifact", Task: "tsk_2"})
	if d.Allow || d.Hook != "local/slow" || d.Reason != "the hook failed, which denies: it did not answer within 200ms" {
		t.Errorf("decision %+v", d)
	}
	if _, err := os.Stat(denySeen); err == nil {
		t.Errorf("a hook after the deciding one ran")
	}
	// A set of no hooks, and a nil set, allow.
	if d := (*Set)(nil).CheckToolCall(context.Background(), ToolCall{Tool: "x"}); !d.Allow {
		t.Errorf("nil set denied")
	}
	only, _ := New(Config{Hooks: []Hook{allow}})
	if d := only.CheckToolCall(context.Background(), ToolCall{Tool: "x"}); !d.Allow {
		t.Errorf("an allowing hook denied: %+v", d)
	}
}

func TestTaskEnd(t *testing.T) {
	quiet, _ := script(t, "local/quiet", `echo '{}'`, EventTaskEnd)
	broken, _ := script(t, "local/broken", `echo oops; exit 1`, EventTaskEnd)
	reopen, seen := script(t, "local/check", `echo '{"reopen": "The answer has no unit; add it."}'`, EventTaskEnd, EventToolCall)
	rec := &recorder{}
	s, err := New(Config{Hooks: []Hook{quiet, broken, reopen}, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.CheckTaskEnd(context.Background(), TaskEnd{Task: "tsk_3", Status: "completed", Answer: "5", Trust: "trusted", Reopens: 1})
	if !ok || r != (Reopen{Hook: "local/check", Message: "The answer has no unit; add it."}) {
		t.Errorf("reopen %+v %v", r, ok)
	}
	told, _ := os.ReadFile(seen)
	if want := `{"event":"on-task-end","task":"tsk_3","status":"completed","answer":"5","trust":"trusted","reopens":1}`; string(told) != want {
		t.Errorf("told %s", told)
	}
	if len(rec.recs) != 1 || rec.recs[0]["type"] != "hook_failed" || rec.recs[0]["hook"] != "local/broken" ||
		!strings.Contains(rec.recs[0]["error"].(string), "exit status 1") {
		t.Errorf("records %v", rec.recs)
	}
	// No hook asking: no reopen.
	s2, _ := New(Config{Hooks: []Hook{quiet}})
	if _, ok := s2.CheckTaskEnd(context.Background(), TaskEnd{Task: "t"}); ok {
		t.Errorf("a quiet hook reopened")
	}
	if _, err := New(Config{Hooks: []Hook{{Name: "local/x", Events: []string{"on-start"}, Runner: quiet.Runner}}}); err == nil ||
		err.Error() != `hook local/x: "on-start" is not a hook event; write on-tool-call or on-task-end` {
		t.Errorf("err = %v", err)
	}
}

// TestToolCallAsk: a hook that decides ask leaves the call to the hooks after it; when none denies, the
// sender is asked the hook's question; a later deny still decides.
func TestToolCallAsk(t *testing.T) {
	call := ToolCall{Tool: "rm", Input: json.RawMessage(`{"args":["-r","build"]}`), Task: "tsk_1"}
	ask, _ := script(t, "local/ask", `echo '{"decision": "ask", "question": "Remove build?", "reason": "removes files"}'`, EventToolCall)
	allow, _ := script(t, "local/allow", `echo '{"decision": "allow"}'`, EventToolCall)
	deny, _ := script(t, "local/deny", `echo '{"decision": "deny", "reason": "never rm"}'`, EventToolCall)
	bare, _ := script(t, "local/bare", `echo '{"decision": "ask"}'`, EventToolCall)
	for _, tc := range []struct {
		name  string
		hooks []Hook
		want  Decision
	}{
		{"ask then allow", []Hook{ask, allow}, Decision{Hook: "local/ask", Ask: true, Question: "Remove build?", Reason: "removes files"}},
		{"ask then deny", []Hook{ask, deny}, Decision{Hook: "local/deny", Reason: "never rm"}},
		{"ask without a question", []Hook{bare}, Decision{Hook: "local/bare", Ask: true, Question: "May the tool rm run?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Hooks: tc.hooks, Recorder: &recorder{}})
			if err != nil {
				t.Fatal(err)
			}
			if d := s.CheckToolCall(context.Background(), call); d != tc.want {
				t.Errorf("decision %+v, want %+v", d, tc.want)
			}
		})
	}
}
