package runtimetools

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/records"
)

type fixedSource StatusSnapshot

func (f fixedSource) StatusSnapshot() StatusSnapshot { return StatusSnapshot(f) }

type memRecorder struct{ recs []map[string]any }

func (m *memRecorder) Write(typ records.Type, task string, fields map[string]any) error {
	rec := map[string]any{"type": string(typ), "task": task}
	for k, v := range fields {
		rec[k] = v
	}
	m.recs = append(m.recs, rec)
	return nil
}

func TestSessionStatusRendersSPECsObject(t *testing.T) {
	start := time.Date(2026, 10, 20, 11, 30, 0, 0, time.UTC)
	now := start.Add(1834*time.Second + 900*time.Millisecond) // rounds down to 1834
	full := StatusSnapshot{
		Now: now, SessionStart: start, TaskStart: start.Add(44 * time.Second), Deadline: time.Date(2026, 10, 20, 14, 0, 0, 0, time.UTC),
		TurnsUsed: 42, KeepWorking: &Counter{Used: 3, Limit: 20}, DoneCheck: &Counter{Used: 1, Limit: 3},
		Context: &ContextSnapshot{UsedTokens: 61234, WindowTokens: 200000, BudgetTokens: 191808, BudgetBasis: "context_window_less_output_cap", MeasuredBy: "estimate"},
		Tokens: TokenTotals{Input: 812345, Output: 23456, Cached: 600000, CacheWrite: 10000,
			HasInput: true, HasOutput: true, HasCached: true, HasCacheWrite: true},
		SpendTokens: 835801,
	}
	want := `{"time":{"elapsed_secs":1834,"task_elapsed_secs":1790,"deadline":{"at":"2026-10-20T14:00:00Z","left_secs":7165}},` +
		`"turns":{"used":42,"cap":"none"},"keep_working":{"used":3,"left":17},"done_check":{"used":1,"left":2},` +
		`"context":{"used_tokens":61234,"window_tokens":200000,"budget_tokens":191808,"budget_basis":"context_window_less_output_cap","measured_by":"estimate"},` +
		`"tokens":{"input":812345,"output":23456,"cached":600000,"cache_write":10000,"unreported_calls":0},` +
		`"spend":{"tokens":835801,"ceiling":"none","machine":"none"}}`
	rec := &memRecorder{}
	tool := &SessionStatus{Source: fixedSource(full), Recorder: rec}
	res, err := tool.Run(context.Background(), Call{Task: "tsk_1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("session-status (-want +got):\n%s", diff)
	}
	if len(rec.recs) != 1 || rec.recs[0]["type"] != "session_status" || rec.recs[0]["task"] != "tsk_1" {
		t.Fatalf("records %v, want one session_status", rec.recs)
	}
	carried, _ := json.Marshal(rec.recs[0]["status"])
	if string(carried) != want {
		t.Errorf("the record carries %s, want the object returned", carried)
	}

	// Every "none" and "unknown": no task, no deadline, no limits, before the first turn, nothing reported.
	bare := StatusSnapshot{Now: now, SessionStart: start, TurnsCap: 0, Tokens: TokenTotals{UnreportedCalls: 2}}
	res, _ = (&SessionStatus{Source: fixedSource(bare), Recorder: rec}).Run(context.Background(), Call{})
	want = `{"time":{"elapsed_secs":1834,"task_elapsed_secs":"unknown","deadline":"none"},"turns":{"used":0,"cap":"none"},` +
		`"keep_working":"none","done_check":"none","context":"unknown",` +
		`"tokens":{"input":"unknown","output":"unknown","cached":"unknown","cache_write":"unknown","unreported_calls":2},` +
		`"spend":{"tokens":0,"ceiling":"none","machine":"none"}}`
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("session-status with nothing known (-want +got):\n%s", diff)
	}

	// Caps set, a window-less choice, a deadline passed.
	capped := StatusSnapshot{Now: now, SessionStart: start, Deadline: start, TurnsCap: 50, SpendCeiling: 2000000,
		Context: &ContextSnapshot{UsedTokens: 10, MeasuredBy: "actual"}, KeepWorking: &Counter{Used: 25, Limit: 20}}
	res, _ = (&SessionStatus{Source: fixedSource(capped), Recorder: rec}).Run(context.Background(), Call{})
	var got map[string]any
	json.Unmarshal([]byte(res.Output), &got)
	for path, want := range map[string]any{
		"turns.cap": 50.0, "spend.ceiling": 2000000.0, "time.deadline.left_secs": 0.0, "keep_working.left": 0.0,
		"context.window_tokens": "none", "context.budget_tokens": "none", "context.budget_basis": "none", "context.measured_by": "actual",
	} {
		if v := dig(got, path); v != want {
			t.Errorf("%s = %v, want %v", path, v, want)
		}
	}
}

func dig(m map[string]any, path string) any {
	var cur any = m
	for _, k := range splitDots(path) {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func TestSessionStatusManifest(t *testing.T) {
	m := (&SessionStatus{}).Manifest()
	if m.Name != "session-status" || string(m.InputSchema) != `{"type":"object","properties":{}}` {
		t.Errorf("manifest %+v", m)
	}
}
