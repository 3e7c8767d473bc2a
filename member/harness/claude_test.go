package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claudeRun is what a claude-stream-json stream comes to: what session-status, the inference records and
// the spend ceilings see, and what the task ends with.
type claudeRun struct {
	Turns   []Usage
	Total   Usage
	Quotas  []Quota
	Notices []string
	Garbage []string
	Answer  string
	IsError bool
}

func readClaude(t *testing.T, file string) claudeRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "claude", file))
	if err != nil {
		t.Fatal(err)
	}
	var r claudeRun
	for _, e := range collect(t, ClaudeStreamJSON, string(b)) {
		switch e.Kind {
		case KindTurn:
			r.Turns = append(r.Turns, e.Usage)
			r.Total = addUsage(r.Total, e.Usage)
		case KindQuota:
			r.Quotas = append(r.Quotas, e.Quota)
		case KindNotice:
			r.Notices = append(r.Notices, e.Reason+": "+e.Text)
		case KindGarbage:
			r.Garbage = append(r.Garbage, e.Reason)
		case KindAnswer:
			r.Answer, r.IsError = e.Text, e.IsError
		}
	}
	return r
}

// Streams in the shapes real Claude Code writes (CLI 2.0 to 2.1), one file each under testdata/claude.
func TestClaudeRecordedShapes(t *testing.T) {
	reported := func(in, out, cached, write int64) Usage {
		return Usage{Input: in, Output: out, Cached: cached, CacheWrite: write, Reported: true, CacheReported: true}
	}
	io := func(in, out int64) Usage { return Usage{Input: in, Output: out, Reported: true} }
	five, week := int64(300), int64(7*24*60)
	tests := []struct {
		file string
		want claudeRun
	}{
		// Each assistant line carries the output count as it stood when its block was written; the
		// result's usage holds the final one, which the last turn takes up.
		{"blocks.jsonl", claudeRun{
			Turns:  []Usage{reported(10, 9, 100, 50), reported(20, 403, 150, 0)},
			Total:  reported(30, 412, 250, 50),
			Answer: "All quiet.",
		}},
		// With --include-partial-messages, message_delta gives each message its final count.
		{"partial.jsonl", claudeRun{
			Turns:  []Usage{reported(10, 120, 0, 0), reported(30, 45, 0, 0)},
			Total:  reported(40, 165, 0, 0),
			Answer: "Done.",
		}},
		{"max_turns.jsonl", claudeRun{
			Turns: []Usage{io(10, 4)}, Total: io(10, 4),
			Answer: "error_max_turns: Reached maximum number of turns (1)", IsError: true,
		}},
		{"mcp_failed.jsonl", claudeRun{
			Turns: []Usage{io(10, 12)}, Total: io(10, 12),
			Notices: []string{`tools_unreachable: Claude Code could not reach the session's tools: its init line gives MCP server "murmur" the status "failed"`},
			Answer:  `Claude Code could not reach the session's tools: its init line gives MCP server "murmur" the status "failed"; its answer was: I have no tool to ask the worker, so: 42.`,
			IsError: true,
		}},
		{"no_tools.jsonl", claudeRun{
			Turns: []Usage{io(10, 12)}, Total: io(10, 12),
			Notices: []string{`tools_unreachable: Claude Code started without the session's tools: MCP server "murmur" is connected but its init line lists none of its tools (mcp__murmur__*); check harness.command's --tools, --allowedTools and --disallowedTools`},
			Answer:  `Claude Code started without the session's tools: MCP server "murmur" is connected but its init line lists none of its tools (mcp__murmur__*); check harness.command's --tools, --allowedTools and --disallowedTools; its answer was: 42`,
			IsError: true,
		}},
		// A subagent's lines are no turn of the session's; the result's totals hold their tokens once.
		{"subagent.jsonl", claudeRun{
			Turns:  []Usage{io(10, 5), reported(250, 85, 0, 0)},
			Total:  reported(260, 90, 0, 0),
			Answer: "There are two files.",
		}},
		{"rate_limits.jsonl", claudeRun{
			Quotas: []Quota{
				{Name: "five-hour", Used: ptr(0.07), ResetsAt: ptr(mustTime(t, "2026-10-20T15:00:00Z")), WindowMinutes: &five, State: "ok"},
				{Name: "seven-day", Used: ptr(0.42), ResetsAt: ptr(mustTime(t, "2026-10-24T15:00:00Z")), WindowMinutes: &week},
				{Name: "unified", Used: ptr(0.91), ResetsAt: ptr(mustTime(t, "2026-10-20T15:00:00Z")), State: "warning"},
				{Name: "unified", State: "exhausted"},
			},
		}},
		// The placeholder Claude Code writes at a usage limit is no model call.
		{"usage_limit.jsonl", claudeRun{
			Quotas:  []Quota{{Name: "five-hour", ResetsAt: ptr(mustTime(t, "2026-10-20T15:00:00Z")), WindowMinutes: &five, State: "exhausted"}},
			Answer:  "You've hit your limit · resets 3pm (UTC)",
			IsError: true,
		}},
		// A successful run whose last message had no text answers with the last text it wrote.
		{"empty_result.jsonl", claudeRun{
			Turns:  []Usage{io(10, 3), reported(30, 57, 0, 0)},
			Total:  reported(40, 60, 0, 0),
			Answer: "The report is in report.md.",
		}},
		// num_turns counts the turns the stream never showed.
		{"num_turns.jsonl", claudeRun{
			Turns:  []Usage{io(60, 30), {}, {}},
			Total:  io(60, 30),
			Answer: "3",
		}},
		// Parallel tool calls: a block of a message after the tool result of its first block is no new turn.
		{"block_after_result.jsonl", claudeRun{
			Turns:  []Usage{io(10, 6), io(30, 44)},
			Total:  io(40, 50),
			Answer: "Two files in /work.",
		}},
		{"denials.jsonl", claudeRun{
			Turns:   []Usage{io(10, 8), io(20, 62)},
			Total:   io(30, 70),
			Notices: []string{"permission_denied: Claude Code refused 1 of its own tool call(s) for want of permission (Write); give it --permission-mode (or --allowedTools) in harness.command"},
			Answer:  "I could not write out.md: permission was refused.",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, readClaude(t, tt.file)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
