package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
)

// claudeFormation runs one member per fake-harness mode under the claude-stream-json dialect, the fake
// writing the shapes a real Claude Code writes.
func claudeFormation(t *testing.T, modes map[string]string) *formationFixture {
	t.Helper()
	bin := fakeHarness(t)
	roster := "formation: f\nmembers:\n"
	files := map[string]string{}
	for name, mode := range modes {
		roster += "  - {name: " + name + ", capsule: ./" + name + ", listen: '127.0.0.1:0'}\n"
		files[name+"/murmur.yaml"] = processCapsule(bin, name, "claude-stream-json", mode, "")
	}
	files["roster.yaml"] = roster
	return startFormation(t, files, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
}

// inferenceTotals sums the inference records' tokens.
func inferenceTotals(trace []map[string]any) (n int, in, out float64) {
	for _, r := range recordsOf(trace, "inference") {
		n++
		if tok, ok := r["tokens"].(map[string]any); ok {
			in += tok["input"].(float64)
			out += tok["output"].(float64)
		}
	}
	return n, in, out
}

// Claude Code's assistant lines carry the output count as it stood when each block was written; the
// session's numbers (session-status, the inference records, the spend ceilings) take the final counts of
// the result. A subagent's model calls are no turns of the session's, and its tokens count once.
func TestProcessClaudeFinalCounts(t *testing.T) {
	fx := claudeFormation(t, map[string]string{"lead": "normal", "sub": "normal"})
	prompt := "call expr {\"args\":[\"1\"]}\nsay hello"
	task := fx.ask(t, "lead", prompt)
	if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "hello" {
		t.Fatalf("lead: %s %q", task.Status.State, task.Status.Message.Text())
	}
	p := int64(len(prompt))
	wantIn, wantOut := (100+p)+(200+p), int64(20+10+len("hello"))
	snap := sessionOf(fx, "lead").StatusSnapshot()
	if snap.Tokens.Input != wantIn || snap.Tokens.Output != wantOut || snap.SpendTokens != wantIn+wantOut {
		t.Errorf("session tokens %+v spend %d, want input %d output %d", snap.Tokens, snap.SpendTokens, wantIn, wantOut)
	}
	if n, in, out := inferenceTotals(traceOf(t, sessionOf(fx, "lead"))); n != 2 || in != float64(wantIn) || out != float64(wantOut) {
		t.Errorf("inference records: %d, input %v output %v; want 2, %d, %d", n, in, out, wantIn, wantOut)
	}

	prompt = "subagent 3\nsay done"
	task = fx.ask(t, "sub", prompt)
	if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "done" {
		t.Fatalf("sub: %s %q", task.Status.State, task.Status.Message.Text())
	}
	p = int64(len(prompt))
	wantIn, wantOut = 100+3*1000+(200+p), int64(20+3*50+10+len("done"))
	snap = sessionOf(fx, "sub").StatusSnapshot()
	if snap.Tokens.Input != wantIn || snap.Tokens.Output != wantOut {
		t.Errorf("sub tokens %+v, want input %d output %d", snap.Tokens, wantIn, wantOut)
	}
	if n, _, _ := inferenceTotals(traceOf(t, sessionOf(fx, "sub"))); n != 2 {
		t.Errorf("%d inference records for 2 model calls of the main agent", n)
	}
}

// How a Claude Code run ends, as the task shows it.
func TestProcessClaudeEndings(t *testing.T) {
	fx := claudeFormation(t, map[string]string{"turns": "normal", "quiet": "normal", "failed": "mcp-failed",
		"notools": "no-tools", "denied": "normal", "limit": "normal"})
	trace := func(name string) []map[string]any { return traceOf(t, sessionOf(fx, name)) }

	t.Run("error_max_turns gives its reason", func(t *testing.T) {
		task := fx.ask(t, "turns", "call expr {\"args\":[\"1\"]}\nmax-turns")
		want := "the harness reported an error: error_max_turns: Reached maximum number of turns (1)"
		if task.Status.State != a2a.TaskStateFailed || task.Status.Message.Text() != want {
			t.Errorf("%s %q, want failed %q", task.Status.State, task.Status.Message.Text(), want)
		}
	})

	t.Run("an empty result answers with the last text", func(t *testing.T) {
		task := fx.ask(t, "quiet", "say The report is in out.md.\nquiet")
		if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "The report is in out.md." {
			t.Errorf("%s %q", task.Status.State, task.Status.Message.Text())
		}
		// num_turns counts the last message, which no line shows.
		if n, _, _ := inferenceTotals(trace("quiet")); n != 2 {
			t.Errorf("%d inference records, want 2", n)
		}
	})

	for _, c := range []struct{ member, want string }{
		{"failed", `Claude Code could not reach the session's tools: its init line gives MCP server "murmur" the status "failed"`},
		{"notools", `Claude Code started without the session's tools: MCP server "murmur" is connected but its init line lists none of its tools`},
	} {
		t.Run("tools out of reach: "+c.member, func(t *testing.T) {
			task := fx.ask(t, c.member, "say 42")
			if task.Status.State != a2a.TaskStateFailed || !strings.HasPrefix(task.Status.Message.Text(), "the harness reported an error: "+c.want) {
				t.Errorf("%s %q, want failed saying %q", task.Status.State, task.Status.Message.Text(), c.want)
			}
			notes := recordsOf(trace(c.member), "harness_notice")
			if len(notes) != 1 || notes[0]["notice"] != "tools_unreachable" || !strings.HasPrefix(notes[0]["text"].(string), c.want) {
				t.Errorf("harness_notice records: %v", notes)
			}
		})
	}

	t.Run("permission denials are recorded", func(t *testing.T) {
		task := fx.ask(t, "denied", "denied Write\nsay I could not write out.md")
		if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != "I could not write out.md" {
			t.Errorf("%s %q", task.Status.State, task.Status.Message.Text())
		}
		notes := recordsOf(trace("denied"), "harness_notice")
		want := "Claude Code refused 1 of its own tool call(s) for want of permission (Write); give it --permission-mode (or --allowedTools) in harness.command"
		if len(notes) != 1 || notes[0]["notice"] != "permission_denied" || notes[0]["text"] != want {
			t.Errorf("harness_notice records: %v", notes)
		}
	})

	t.Run("quota windows and a usage limit", func(t *testing.T) {
		task := fx.ask(t, "limit", "windows 0.07 0.42\nsay ok")
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("%s %q", task.Status.State, task.Status.Message.Text())
		}
		task = fx.ask(t, "limit", "limit")
		want := "the harness reported an error: You've hit your limit · resets 3pm (UTC)"
		if task.Status.State != a2a.TaskStateFailed || task.Status.Message.Text() != want {
			t.Errorf("%s %q, want failed %q", task.Status.State, task.Status.Message.Text(), want)
		}
		var got []string
		for _, q := range sessionOf(fx, "limit").StatusSnapshot().Quota {
			used := "-"
			if q.Used != nil {
				used = strings.TrimRight(strings.TrimRight(strconvF(*q.Used), "0"), ".")
			}
			got = append(got, q.Name+" "+used+" "+q.State+" "+q.ResetsAt)
		}
		wantQ := []string{"five-hour 0.07 ok 2026-10-20T15:00:00Z", "seven-day 0.42  2026-10-24T15:00:00Z", "unified - exhausted "}
		if diff := cmp.Diff(wantQ, got); diff != "" {
			t.Errorf("quota (-want +got):\n%s", diff)
		}
		// The placeholder message at the limit is no model call: one turn, the first task's.
		if n, _, _ := inferenceTotals(trace("limit")); n != 1 {
			t.Errorf("%d inference records, want 1", n)
		}
	})
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) }

// The spend ceiling sees the final counts: a run whose provisional counts stay under
// inference.max_session_tokens and whose final counts reach it is stopped, and the task says why.
func TestProcessClaudeSpendCeiling(t *testing.T) {
	bin := fakeHarness(t)
	prompt := "say " + strings.Repeat("x", 60)
	// One turn: 100 plus the prompt's length in; 10 plus the answer's 60 out, of which the assistant
	// lines show a quarter.
	in := int64(100 + len(prompt))
	ceiling := in + 40
	fx := startFormation(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml": processCapsule(bin, "lead", "claude-stream-json", "normal", "inference: {max_session_tokens: "+strconv.FormatInt(ceiling, 10)+"}\n"),
	}, Tokens{Operator: "operator-token-process-tests", Formation: "formation-secret-process-tests"})
	task := fx.ask(t, "lead", prompt)
	want := "the session has spent " + strconv.FormatInt(in+70, 10) + " tokens, its inference.max_session_tokens ceiling of " + strconv.FormatInt(ceiling, 10)
	if task.Status.State == a2a.TaskStateCompleted || !strings.HasPrefix(task.Status.Message.Text(), want) {
		t.Errorf("%s %q, want it stopped: %q", task.Status.State, task.Status.Message.Text(), want)
	}
}
