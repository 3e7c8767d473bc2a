package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func collect(t *testing.T, d Dialect, stream string) []Event {
	t.Helper()
	var out []Event
	if err := Read(strings.NewReader(stream), d, func(e Event) { out = append(out, e) }); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestMurmurJSONL(t *testing.T) {
	stream := `{"type":"turn","usage":{"input":100,"output":20}}
this is not json
{"type":"quota","name":"five-hour","used":0.42,"resets_at":"2026-10-20T15:00:00Z","window_minutes":300,"state":"ok"}
{"type":"turn","usage":{"input":120,"output":30,"cached":80,"cache_write":5}}
{"type":"turn"}
{"type":"wat"}
{"type":"quota","name":"weekly","used":7}

{"type":"answer","text":"42","session":"hs-1"}
`
	got := collect(t, MurmurJSONL, stream)
	want := []Event{
		{Kind: KindTurn, Line: 1, Usage: Usage{Input: 100, Output: 20, Reported: true}},
		{Kind: KindGarbage, Line: 2, Text: "this is not json", Reason: "not a JSON object"},
		{Kind: KindQuota, Line: 3, Quota: Quota{Name: "five-hour", Used: ptr(0.42), ResetsAt: ptr(mustTime(t, "2026-10-20T15:00:00Z")), WindowMinutes: ptr(int64(300)), State: "ok"}},
		{Kind: KindTurn, Line: 4, Usage: Usage{Input: 120, Output: 30, Cached: 80, CacheWrite: 5, Reported: true, CacheReported: true}},
		{Kind: KindTurn, Line: 5},
		{Kind: KindGarbage, Line: 6, Text: `{"type":"wat"}`, Reason: `unknown event type "wat" (murmur-jsonl has turn, quota, answer, session)`},
		{Kind: KindGarbage, Line: 7, Text: `{"type":"quota","name":"weekly","used":7}`, Reason: `quota "weekly": used 7 is not a fraction from 0 to 1`},
		{Kind: KindSession, Line: 9, Session: "hs-1"},
		{Kind: KindAnswer, Line: 9, Text: "42", Session: "hs-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(got[2].Quota)
	if string(b) != `{"name":"five-hour","used":0.42,"window_minutes":300,"state":"ok","resets_at":"2026-10-20T15:00:00Z"}` {
		t.Errorf("quota as JSON: %s", b)
	}
}

func TestClaudeStreamJSON(t *testing.T) {
	stream := `{"type":"system","subtype":"init","session_id":"c0ffee","tools":["mcp__murmur__expr"]}
{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"let me"}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"c0ffee"}
{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use"}],"usage":{"input_tokens":10,"output_tokens":7,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}},"session_id":"c0ffee"}
{"type":"user","message":{"content":[{"type":"tool_result"}]},"session_id":"c0ffee"}
{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1792508400,"rateLimitType":"five_hour","utilization":0.9}}
{"type":"assistant","message":{"id":"msg_2","content":[{"type":"text","text":"3"}],"usage":{"input_tokens":20,"output_tokens":2}},"session_id":"c0ffee"}
{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"3","session_id":"c0ffee","usage":{"input_tokens":30,"output_tokens":9}}
`
	got := collect(t, ClaudeStreamJSON, stream)
	want := []Event{
		{Kind: KindSession, Line: 1, Session: "c0ffee"},
		{Kind: KindSession, Line: 2, Session: "c0ffee"},
		{Kind: KindSession, Line: 3, Session: "c0ffee"},
		{Kind: KindTurn, Line: 2, Usage: Usage{Input: 10, Output: 7, Cached: 3, CacheWrite: 2, Reported: true, CacheReported: true}},
		{Kind: KindSession, Line: 4, Session: "c0ffee"},
		{Kind: KindQuota, Line: 5, Quota: Quota{Name: "five-hour", Used: ptr(0.9), ResetsAt: ptr(mustTime(t, "2026-10-20T15:00:00Z")), WindowMinutes: ptr(int64(300)), State: "warning"}},
		{Kind: KindSession, Line: 6, Session: "c0ffee"},
		{Kind: KindTurn, Line: 6, Usage: Usage{Input: 20, Output: 2, Reported: true}},
		{Kind: KindSession, Line: 7, Session: "c0ffee"},
		{Kind: KindAnswer, Line: 7, Text: "3", Session: "c0ffee"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A result with turns the stream never showed as assistant events stands for them; an error result is
// an answer marked as an error.
func TestClaudeResultOnly(t *testing.T) {
	got := collect(t, ClaudeStreamJSON, `{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":2,"result":"out of turns","usage":{"input_tokens":5,"output_tokens":1}}`)
	want := []Event{
		{Kind: KindTurn, Line: 1, Usage: Usage{Input: 5, Output: 1, Reported: true}},
		{Kind: KindTurn, Line: 1},
		{Kind: KindAnswer, Line: 1, Text: "out of turns", IsError: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A stream that ends mid-line: the partial line is parsed as it stands, garbage when it does not parse;
// an open turn is still closed, at the end. Reading one byte at a time changes nothing.
func TestStreamCutMidLine(t *testing.T) {
	stream := `{"type":"system","session_id":"s"}
{"type":"assistant","message":{"id":"m","usage":{"input_tokens":4,"output_tokens":2}}}
{"type":"result","result":"unfinis`
	var got []Event
	if err := Read(iotest.OneByteReader(strings.NewReader(stream)), ClaudeStreamJSON, func(e Event) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: KindSession, Line: 1, Session: "s"},
		{Kind: KindGarbage, Line: 3, Text: `{"type":"result","result":"unfinis`, Reason: "the stream ended mid-line: not a JSON object"},
		{Kind: KindTurn, Line: 2, Usage: Usage{Input: 4, Output: 2, Reported: true}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A last line without its newline that is whole is an event.
	got = collect(t, MurmurJSONL, `{"type":"answer","text":"done"}`)
	if len(got) != 1 || got[0].Kind != KindAnswer || got[0].Text != "done" {
		t.Errorf("a whole last line without newline: %+v", got)
	}
}

func TestGarbageKinds(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	stream := "[1,2]\n{\"type\":\"turn\",\"usage\":{\"input\":\"many\"}}\n" + long + "\n{\"type\":\"answer\",\"text\":\"ok\"}\n\x00\xff\n"
	got := collect(t, MurmurJSONL, stream)
	var reasons []string
	for _, e := range got {
		if e.Kind == KindGarbage {
			reasons = append(reasons, e.Reason)
			if len(e.Text) > garbageShown {
				t.Errorf("garbage line kept %d bytes", len(e.Text))
			}
		}
	}
	want := []string{"not a JSON object", "field usage.input is not a int64", "a line longer than 4194304 bytes", "not a JSON object"}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("garbage reasons (-want +got):\n%s", diff)
	}
	if e := got[3]; e.Kind != KindAnswer || e.Text != "ok" || e.Line != 4 {
		t.Errorf("the answer after a too-long line: %+v", e)
	}
}

func TestParseDialect(t *testing.T) {
	if d, err := ParseDialect("murmur-jsonl"); err != nil || d != MurmurJSONL {
		t.Errorf("murmur-jsonl: %v %v", d, err)
	}
	_, err := ParseDialect("claude-json")
	if err == nil || err.Error() != `unknown harness dialect "claude-json"; use one of claude-stream-json, murmur-jsonl` {
		t.Errorf("unknown dialect: %v", err)
	}
}
