package runtimetools

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Under transport: process: context "unknown" (no Context), and quota, after context, each window with
// only the fields the harness reported, in the order the names were first reported.
func TestSessionStatusProcessColumn(t *testing.T) {
	start := time.Date(2026, 10, 20, 11, 30, 0, 0, time.UTC)
	used, minutes := 0.42, int64(300)
	snap := StatusSnapshot{
		Now: start.Add(10 * time.Second), SessionStart: start, TaskStart: start, TurnsUsed: 3, TurnsCap: 40,
		Tokens:      TokenTotals{Input: 900, Output: 60, HasInput: true, HasOutput: true},
		SpendTokens: 960,
		Quota: []QuotaWindow{
			{Name: "five-hour", Used: &used, ResetsAt: "2026-10-20T15:00:00Z", WindowMinutes: &minutes, State: "ok"},
			{Name: "weekly", State: "exhausted"},
		},
	}
	want := `{"time":{"elapsed_secs":10,"task_elapsed_secs":10,"deadline":"none"},"turns":{"used":3,"cap":40},` +
		`"keep_working":"none","done_check":"none","context":"unknown",` +
		`"quota":[{"name":"five-hour","used":0.42,"resets_at":"2026-10-20T15:00:00Z","window_minutes":300,"state":"ok"},{"name":"weekly","state":"exhausted"}],` +
		`"tokens":{"input":900,"output":60,"cached":"unknown","cache_write":"unknown","unreported_calls":0},` +
		`"spend":{"tokens":960,"ceiling":"none","machine":"none"}}`
	res, err := (&SessionStatus{Source: fixedSource(snap), Recorder: &memRecorder{}}).Run(context.Background(), Call{Task: "tsk_1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("session-status (-want +got):\n%s", diff)
	}
}
