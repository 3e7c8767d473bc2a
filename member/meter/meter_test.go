package meter_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/runtimetools"
)

var (
	started = time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)
	now     = started.Add(90 * time.Second) // the fake clock's only reading
)

// record is one record the meter wrote.
type record struct {
	Type, Task string
	Fields     map[string]any
}

// recorder keeps what a Meter writes; it is safe for concurrent use, as a session's records are.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) write(typ records.Type, task string, fields map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, record{string(typ), task, fields})
	return nil
}

func (r *recorder) all() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.recs...)
}

// task1 is the task the tests run, "t1".
func task1() *a2a.Task { return &a2a.Task{ID: "t1"} }

// begin begins task1 on m, outside any span.
func begin(m *meter.Meter) time.Time { return m.BeginTask(context.Background(), task1()) }

// fixture is a Meter with its records and the inference series of a fresh registry.
type fixture struct {
	m      *meter.Meter
	rec    *recorder
	series *metrics.Series
}

func newFixture(t *testing.T, c *capsule.Capsule) fixture {
	t.Helper()
	series, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m := meter.New(meter.Config{Capsule: c, Now: func() time.Time { return now }, Started: started,
		Record: rec.write, Calls: series.InferenceCalls, Tokens: series.InferenceTokens})
	return fixture{m, rec, series}
}

// agent is an agent capsule with one choice, "main"; edit adjusts it.
func agent(edit func(*capsule.Capsule)) *capsule.Capsule {
	c := &capsule.Capsule{Inference: &capsule.Inference{Driver: "main", ChoiceOrder: []string{"main"},
		Choices: map[string]capsule.Choice{"main": {Driver: "openai", Model: "gpt-test"}}}}
	if edit != nil {
		edit(c)
	}
	return c
}

func intp(n int) *int { return &n }

// estimated is a call whose provider reports no usage: its input is estimated at 10 tokens (40 runes of
// system prompt), its output at 5 (20 runes of text).
var estimated = struct {
	req  driver.InferRequest
	resp driver.InferResponse
}{
	driver.InferRequest{System: strings.Repeat("s", 40), Turn: 1},
	driver.InferResponse{Text: strings.Repeat("t", 20)},
}

func TestAccountCountsTurnSpendTokensAndRecordPerCall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		usage      driver.Usage
		wantSpend  int64
		wantTokens runtimetools.TokenTotals
		wantRecord map[string]any
		// wantSeries are the token series by kind; nil: the call adds none.
		wantSeries map[string]float64
		wantCtx    runtimetools.ContextSnapshot
	}{{
		name:       "reported usage with the cache",
		usage:      driver.Usage{Input: 100, Output: 20, Cached: 7, CacheWrite: 3, Reported: true, CacheReported: true},
		wantSpend:  120,
		wantTokens: runtimetools.TokenTotals{Input: 100, Output: 20, Cached: 7, CacheWrite: 3, HasInput: true, HasOutput: true, HasCached: true, HasCacheWrite: true},
		wantRecord: map[string]any{"driver": "main", "model": "gpt-test", "turn": 1, "measured_by": "actual",
			"tokens": map[string]any{"input": int64(100), "output": int64(20), "cached": int64(7), "cache_write": int64(3)}},
		wantSeries: map[string]float64{"input": 100, "output": 20, "cached": 7, "cache_write": 3},
		wantCtx:    runtimetools.ContextSnapshot{UsedTokens: 120, MeasuredBy: "actual"},
	}, {
		name:       "reported usage without the cache",
		usage:      driver.Usage{Input: 100, Output: 20, Reported: true},
		wantSpend:  120,
		wantTokens: runtimetools.TokenTotals{Input: 100, Output: 20, HasInput: true, HasOutput: true},
		wantRecord: map[string]any{"driver": "main", "model": "gpt-test", "turn": 1, "measured_by": "actual",
			"tokens": map[string]any{"input": int64(100), "output": int64(20), "cached": int64(0), "cache_write": int64(0)}},
		wantSeries: map[string]float64{"input": 100, "output": 20},
		wantCtx:    runtimetools.ContextSnapshot{UsedTokens: 120, MeasuredBy: "actual"},
	}, {
		name:       "no usage: the runtime's estimate counts in the spend only",
		wantSpend:  15,
		wantTokens: runtimetools.TokenTotals{UnreportedCalls: 1},
		wantRecord: map[string]any{"driver": "main", "model": "gpt-test", "turn": 1, "measured_by": "estimate"},
		wantCtx:    runtimetools.ContextSnapshot{UsedTokens: 15, MeasuredBy: "estimate"},
	}, {
		name:       "the driver's own estimate counts in the spend only",
		usage:      driver.Usage{Input: 60, Output: 9, Estimated: true},
		wantSpend:  69,
		wantTokens: runtimetools.TokenTotals{UnreportedCalls: 1},
		wantRecord: map[string]any{"driver": "main", "model": "gpt-test", "turn": 1, "measured_by": "estimate"},
		wantCtx:    runtimetools.ContextSnapshot{UsedTokens: 69, MeasuredBy: "estimate"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, agent(nil))
			begin(f.m)
			resp := estimated.resp
			resp.Usage = tc.usage
			f.m.Account("t1", "main", estimated.req, resp)

			turns, spend := f.m.Used()
			if turns != 1 || spend != tc.wantSpend {
				t.Errorf("Used() = %d turns, %d spend; want 1, %d", turns, spend, tc.wantSpend)
			}
			snap := f.m.Snapshot(time.Time{}, nil)
			if diff := cmp.Diff(tc.wantTokens, snap.Tokens); diff != "" {
				t.Errorf("token sums (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&tc.wantCtx, snap.Context); diff != "" {
				t.Errorf("context (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]record{{"inference", "t1", tc.wantRecord}}, f.rec.all()); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if n := testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues("main", "gpt-test", "openai")); n != 1 {
				t.Errorf("inference calls of main = %v, want 1", n)
			}
			if n := testutil.CollectAndCount(f.series.InferenceTokens); n != len(tc.wantSeries) {
				t.Errorf("%d token series, want %d", n, len(tc.wantSeries))
			}
			for kind, want := range tc.wantSeries {
				if got := testutil.ToFloat64(f.series.InferenceTokens.WithLabelValues("main", "gpt-test", "openai", kind)); got != want {
					t.Errorf("tokens of main, %s = %v, want %v", kind, got, want)
				}
			}
		})
	}
}

func TestAccountSumsCallsTurnsPerTaskSpendPerSession(t *testing.T) {
	f := newFixture(t, agent(nil))
	reported := driver.InferResponse{Usage: driver.Usage{Input: 30, Output: 4, Reported: true}}

	f.m.Account("", "main", estimated.req, reported) // outside a task: spend, no turn
	if turns, spend := f.m.Used(); turns != 0 || spend != 34 {
		t.Fatalf("outside a task: Used() = %d, %d; want 0, 34", turns, spend)
	}
	begin(f.m)
	f.m.Account("t1", "main", estimated.req, reported)
	f.m.Account("t1", "main", estimated.req, estimated.resp)
	if turns, spend := f.m.Used(); turns != 2 || spend != 34+34+15 {
		t.Fatalf("first task: Used() = %d, %d; want 2, %d", turns, spend, 34+34+15)
	}
	f.m.EndTask(task1())
	begin(f.m)
	f.m.Account("t2", "main", estimated.req, reported)
	if turns, spend := f.m.Used(); turns != 1 || spend != 34*3+15 {
		t.Fatalf("second task: Used() = %d, %d; want 1, %d", turns, spend, 34*3+15)
	}
	want := runtimetools.TokenTotals{Input: 90, Output: 12, HasInput: true, HasOutput: true, UnreportedCalls: 1}
	if diff := cmp.Diff(want, f.m.Snapshot(time.Time{}, nil).Tokens); diff != "" {
		t.Errorf("token sums (-want +got):\n%s", diff)
	}
	if n := testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues("main", "gpt-test", "openai")); n != 4 {
		t.Errorf("inference calls of main = %v, want 4", n)
	}
	if n := testutil.ToFloat64(f.series.InferenceTokens.WithLabelValues("main", "gpt-test", "openai", "input")); n != 90 {
		t.Errorf("input tokens of main = %v, want 90 (the estimate is not counted)", n)
	}
}

func TestHarnessTurnCountsReportedUsageOnly(t *testing.T) {
	f := newFixture(t, agent(nil))
	begin(f.m)
	for i, tc := range []struct {
		usage     harness.Usage
		wantTurn  int
		wantSpend int64
	}{
		{harness.Usage{Input: 50, Output: 10, Cached: 40, Reported: true, CacheReported: true}, 1, 60},
		{harness.Usage{}, 2, 60}, // nothing reported: a turn, and no spend to estimate from
		{harness.Usage{Input: 5, Output: 1, Reported: true}, 3, 66},
	} {
		turn, spend := f.m.HarnessTurn("t1", tc.usage)
		if turn != tc.wantTurn || spend != tc.wantSpend {
			t.Errorf("turn %d: HarnessTurn = %d, %d; want %d, %d", i+1, turn, spend, tc.wantTurn, tc.wantSpend)
		}
	}
	want := runtimetools.TokenTotals{Input: 55, Output: 11, Cached: 40, HasInput: true, HasOutput: true,
		HasCached: true, HasCacheWrite: true, UnreportedCalls: 1}
	if diff := cmp.Diff(want, f.m.Snapshot(time.Time{}, nil).Tokens); diff != "" {
		t.Errorf("token sums (-want +got):\n%s", diff)
	}
	if n := testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues(harness.DriverName, "", "")); n != 3 {
		t.Errorf("inference calls of %s = %v, want 3", harness.DriverName, n)
	}
	for kind, want := range map[string]float64{"input": 55, "output": 11, "cached": 40} {
		if got := testutil.ToFloat64(f.series.InferenceTokens.WithLabelValues(harness.DriverName, "", "", kind)); got != want {
			t.Errorf("tokens of %s, %s = %v, want %v", harness.DriverName, kind, got, want)
		}
	}
	if recs := f.rec.all(); len(recs) != 0 {
		t.Errorf("HarnessTurn wrote %v; the harness writes its own inference records", recs)
	}
}

func TestTurnsLeftAgainstMaxTurns(t *testing.T) {
	for _, tc := range []struct {
		maxTurns, calls int
		want            bool
	}{
		{0, 0, true},
		{0, 50, true}, // no cap
		{2, 0, true},
		{2, 1, true},
		{2, 2, false},
		{2, 3, false},
	} {
		f := newFixture(t, agent(func(c *capsule.Capsule) { c.Inference.MaxTurns = tc.maxTurns }))
		begin(f.m)
		for range tc.calls {
			f.m.HarnessTurn("t1", harness.Usage{})
		}
		if got := f.m.TurnsLeft(); got != tc.want {
			t.Errorf("max_turns %d after %d turns: TurnsLeft() = %v, want %v", tc.maxTurns, tc.calls, got, tc.want)
		}
	}
}

func TestKeepWorkingCountsUpToItsLimit(t *testing.T) {
	type use struct {
		Used, Left int
		OK         bool
	}
	for _, tc := range []struct {
		name   string
		kw     *capsule.KeepWorking
		inTask bool
		want   []use
	}{
		{"not set", nil, true, []use{{0, 0, false}}},
		{"limit 0", &capsule.KeepWorking{Limit: 0}, true, []use{{0, 0, false}}},
		{"limit 2", &capsule.KeepWorking{Limit: 2}, true, []use{{1, 1, true}, {2, 0, true}, {0, 0, false}, {0, 0, false}}},
		{"outside a task", &capsule.KeepWorking{Limit: 2}, false, []use{{0, 0, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, agent(func(c *capsule.Capsule) { c.Lifecycle.KeepWorking = tc.kw }))
			if tc.inTask {
				begin(f.m)
			}
			var got []use
			for range tc.want {
				used, left, ok := f.m.KeepWorking()
				got = append(got, use{used, left, ok})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("KeepWorking() in turn (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeepWorkingLimitIsPerTask(t *testing.T) {
	f := newFixture(t, agent(func(c *capsule.Capsule) { c.Lifecycle.KeepWorking = &capsule.KeepWorking{Limit: 1} }))
	begin(f.m)
	if _, _, ok := f.m.KeepWorking(); !ok {
		t.Fatal("first task: no nudge of a limit of 1")
	}
	f.m.EndTask(task1())
	begin(f.m)
	if used, left, ok := f.m.KeepWorking(); used != 1 || left != 0 || !ok {
		t.Errorf("second task: KeepWorking() = %d, %d, %v; want 1, 0, true", used, left, ok)
	}
}

func TestCheckFailedReopensWithinBothLimits(t *testing.T) {
	type reopen struct {
		Used int
		OK   bool
	}
	for _, tc := range []struct {
		name      string
		limit     int
		maxReopen *int
		hooked    int // reopens an on-task-end hook asked for first
		want      []reopen
		wantCount int // Reopens() at the end
	}{
		{"done_check limit", 2, nil, 0, []reopen{{1, true}, {2, true}, {2, false}, {2, false}}, 2},
		{"limit 0", 0, nil, 0, []reopen{{0, false}}, 0},
		{"max_task_reopens below the limit", 5, intp(1), 0, []reopen{{1, true}, {1, false}}, 1},
		{"max_task_reopens 0", 5, intp(0), 0, []reopen{{0, false}}, 0},
		{"max_task_reopens above the limit", 1, intp(3), 0, []reopen{{1, true}, {1, false}}, 1},
		{"hook reopens count against max_task_reopens", 5, intp(2), 1, []reopen{{1, true}, {1, false}}, 2},
		{"hook reopens do not count against the limit", 2, nil, 3, []reopen{{1, true}, {2, true}, {2, false}}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, agent(func(c *capsule.Capsule) {
				c.Lifecycle.DoneCheck = &capsule.DoneCheck{Command: []string{"true"}, Limit: tc.limit}
				c.Lifecycle.MaxTaskReopens = tc.maxReopen
			}))
			begin(f.m)
			for range tc.hooked {
				f.m.Reopened()
			}
			var got []reopen
			for range tc.want {
				used, ok := f.m.CheckFailed()
				got = append(got, reopen{used, ok})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckFailed() in turn (-want +got):\n%s", diff)
			}
			if n := f.m.Reopens(); n != tc.wantCount {
				t.Errorf("Reopens() = %d, want %d", n, tc.wantCount)
			}
		})
	}
}

func TestOutsideATaskNothingIsCounted(t *testing.T) {
	f := newFixture(t, agent(func(c *capsule.Capsule) {
		c.Lifecycle.DoneCheck = &capsule.DoneCheck{Command: []string{"true"}, Limit: 3}
	}))
	if used, ok := f.m.CheckFailed(); used != 0 || ok {
		t.Errorf("CheckFailed() = %d, %v; want 0, false", used, ok)
	}
	f.m.Reopened()
	f.m.SetData(json.RawMessage(`1`))
	if n := f.m.Reopens(); n != 0 {
		t.Errorf("Reopens() = %d, want 0", n)
	}
	if p := f.m.EndTask(task1()); !cmp.Equal(p, meter.Progress{}, cmpopts.IgnoreUnexported(meter.Progress{})) {
		t.Errorf("EndTask() without a task = %+v, want the zero Progress", p)
	}
}

func TestEndTaskReturnsTheProgressAndResetsIt(t *testing.T) {
	f := newFixture(t, agent(func(c *capsule.Capsule) {
		c.Lifecycle.KeepWorking = &capsule.KeepWorking{Limit: 3}
		c.Lifecycle.DoneCheck = &capsule.DoneCheck{Command: []string{"true"}, Limit: 3}
	}))
	if start := begin(f.m); !start.Equal(now) {
		t.Errorf("BeginTask() = %s, want the clock's %s", start, now)
	}
	f.m.HarnessTurn("t1", harness.Usage{Input: 5, Output: 5, Reported: true})
	f.m.Account("t1", "main", estimated.req, estimated.resp)
	f.m.KeepWorking()
	f.m.CheckFailed()
	f.m.Reopened()
	f.m.SetData(json.RawMessage(`{"ok":true}`))

	want := meter.Progress{Task: "t1", Start: now, Turns: 2, KeepWorking: 1, DoneCheck: 1, Reopens: 2, Data: json.RawMessage(`{"ok":true}`)}
	if diff := cmp.Diff(want, f.m.EndTask(task1()), cmpopts.IgnoreUnexported(meter.Progress{})); diff != "" {
		t.Errorf("EndTask() (-want +got):\n%s", diff)
	}
	if turns, spend := f.m.Used(); turns != 0 || spend != 25 {
		t.Errorf("after EndTask: Used() = %d, %d; want 0 turns and the session's 25", turns, spend)
	}
	if n := f.m.Reopens(); n != 0 {
		t.Errorf("after EndTask: Reopens() = %d, want 0", n)
	}
	begin(f.m)
	if diff := cmp.Diff(meter.Progress{Task: "t1", Start: now}, f.m.EndTask(task1()), cmpopts.IgnoreUnexported(meter.Progress{})); diff != "" {
		t.Errorf("the next task's EndTask() (-want +got):\n%s", diff)
	}
}

func TestSnapshot(t *testing.T) {
	deadline := started.Add(time.Hour)
	used := 0.25
	quota := []runtimetools.QuotaWindow{{Name: "5h", Used: &used, State: "allowed"}}
	limits := func(c *capsule.Capsule) {
		c.Inference.MaxTurns = 9
		c.Inference.MaxSessionTokens = 5000
		c.Inference.Choices["main"] = capsule.Choice{Driver: "openai", Model: "gpt-test", ContextWindow: 1000, MaxOutputTokens: 200}
		c.Lifecycle.KeepWorking = &capsule.KeepWorking{Limit: 4}
		c.Lifecycle.DoneCheck = &capsule.DoneCheck{Command: []string{"true"}, Limit: 2}
	}
	inTask := func(m *meter.Meter) {
		begin(m)
		m.Account("t1", "main", estimated.req, driver.InferResponse{Usage: driver.Usage{Input: 300, Output: 40, Reported: true}})
		m.Account("t1", "main", estimated.req, estimated.resp)
		m.KeepWorking()
		m.CheckFailed()
		m.Reopened() // a hook's reopen is no done_check's
	}
	for _, tc := range []struct {
		name    string
		capsule *capsule.Capsule
		do      func(*meter.Meter)
		want    runtimetools.StatusSnapshot
	}{{
		name:    "in a task",
		capsule: agent(limits),
		do:      inTask,
		want: runtimetools.StatusSnapshot{Now: now, SessionStart: started, TaskStart: now, Deadline: deadline,
			TurnsUsed: 2, TurnsCap: 9,
			KeepWorking: &runtimetools.Counter{Used: 1, Limit: 4}, DoneCheck: &runtimetools.Counter{Used: 1, Limit: 2},
			Context: &runtimetools.ContextSnapshot{UsedTokens: 15, WindowTokens: 1000, BudgetTokens: 800,
				BudgetBasis: "context_window_less_output_cap", MeasuredBy: "estimate"},
			Tokens:      runtimetools.TokenTotals{Input: 300, Output: 40, HasInput: true, HasOutput: true, UnreportedCalls: 1},
			SpendTokens: 355, SpendCeiling: 5000, Quota: quota},
	}, {
		name:    "after the task: the session's numbers stay, the task's go",
		capsule: agent(limits),
		do:      func(m *meter.Meter) { inTask(m); m.EndTask(task1()) },
		want: runtimetools.StatusSnapshot{Now: now, SessionStart: started, Deadline: deadline,
			TurnsCap:    9,
			KeepWorking: &runtimetools.Counter{Limit: 4}, DoneCheck: &runtimetools.Counter{Limit: 2},
			Context: &runtimetools.ContextSnapshot{UsedTokens: 15, WindowTokens: 1000, BudgetTokens: 800,
				BudgetBasis: "context_window_less_output_cap", MeasuredBy: "estimate"},
			Tokens:      runtimetools.TokenTotals{Input: 300, Output: 40, HasInput: true, HasOutput: true, UnreportedCalls: 1},
			SpendTokens: 355, SpendCeiling: 5000, Quota: quota},
	}, {
		name:    "no limits set, before the first call",
		capsule: agent(nil),
		do:      func(m *meter.Meter) { begin(m) },
		want:    runtimetools.StatusSnapshot{Now: now, SessionStart: started, TaskStart: now, Deadline: deadline, Quota: quota},
	}, {
		name:    "a script capsule",
		capsule: &capsule.Capsule{Script: &capsule.ScriptSpec{Command: []string{"true"}}},
		do:      func(m *meter.Meter) { begin(m) },
		want:    runtimetools.StatusSnapshot{Now: now, SessionStart: started, TaskStart: now, Deadline: deadline, Quota: quota},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.capsule)
			tc.do(f.m)
			if diff := cmp.Diff(tc.want, f.m.Snapshot(deadline, quota)); diff != "" {
				t.Errorf("Snapshot (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSnapshotContextIsACopy(t *testing.T) {
	f := newFixture(t, agent(nil))
	f.m.Account("", "main", estimated.req, estimated.resp)
	f.m.Snapshot(time.Time{}, nil).Context.UsedTokens = 999
	if got := f.m.Snapshot(time.Time{}, nil).Context.UsedTokens; got != 15 {
		t.Errorf("context after a snapshot's copy changed: %d tokens, want 15", got)
	}
}

// conversation is a task's message, then three turns of an assistant and a user message.
func conversation() driver.InferRequest {
	req := driver.InferRequest{Messages: []driver.ChatMessage{{Role: driver.RoleUser, Text: "the task"}}}
	for range 3 {
		req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleAssistant, Text: strings.Repeat("a", 40)},
			driver.ChatMessage{Role: driver.RoleUser, Text: strings.Repeat("u", 40)})
	}
	return req
}

func TestCompactPastTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		name        string
		window      int
		usedTokens  int64
		wantRemoved int // 0: no compaction
	}{
		{"past the threshold", 1000, 600, 2},
		{"at the threshold", 1000, 500, 0},
		{"below the threshold", 1000, 100, 0},
		{"no context window", 0, 100000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, agent(func(c *capsule.Capsule) {
				c.Inference.Choices["main"] = capsule.Choice{Driver: "openai", Model: "gpt-test", ContextWindow: tc.window}
				c.Inference.Compaction.Threshold = 0.5
			}))
			f.m.Account("t1", "main", estimated.req, driver.InferResponse{Usage: driver.Usage{Input: tc.usedTokens, Reported: true}})
			req, hist := conversation(), 0
			before := len(req.Messages)
			f.m.Compact("t1", &req, &hist)

			if removed := before - len(req.Messages); removed != tc.wantRemoved {
				t.Fatalf("Compact removed %d messages, want %d", removed, tc.wantRemoved)
			}
			recs := f.rec.all()[1:] // after the inference record
			ctx := f.m.Snapshot(time.Time{}, nil).Context
			if tc.wantRemoved == 0 {
				if len(recs) != 0 {
					t.Errorf("records %v, want none", recs)
				}
				if ctx.UsedTokens != tc.usedTokens || ctx.MeasuredBy != "actual" {
					t.Errorf("context %+v, want the call's %d actual tokens", ctx, tc.usedTokens)
				}
				return
			}
			after := driver.EstimateInput(req)
			want := []record{{"compaction", "t1", map[string]any{"tokens_before": tc.usedTokens, "tokens_before_source": "actual",
				"tokens_after": after, "budget_tokens": tc.window, "threshold": 0.5, "removed_messages": tc.wantRemoved}}}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			wantCtx := &runtimetools.ContextSnapshot{UsedTokens: after, WindowTokens: tc.window, BudgetTokens: tc.window,
				BudgetBasis: "context_window_less_output_cap", MeasuredBy: "estimate"}
			if diff := cmp.Diff(wantCtx, ctx); diff != "" {
				t.Errorf("context after compaction (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConcurrentAccountingAndSnapshots runs the session's accounting from several goroutines while
// another snapshots: every snapshot must be consistent in itself, and the sums exact at the end.
func TestConcurrentAccountingAndSnapshots(t *testing.T) {
	const workers, calls = 4, 1000
	f := newFixture(t, agent(func(c *capsule.Capsule) {
		c.Lifecycle.KeepWorking = &capsule.KeepWorking{Limit: workers * calls}
		c.Lifecycle.DoneCheck = &capsule.DoneCheck{Command: []string{"true"}, Limit: workers * calls}
	}))
	begin(f.m)
	// Every call spends 10 tokens, all reported, so a consistent snapshot has 10 per turn and its
	// token sums equal its spend.
	call := driver.InferResponse{Usage: driver.Usage{Input: 7, Output: 3, Reported: true}}
	turn := harness.Usage{Input: 7, Output: 3, Reported: true}

	var accounting sync.WaitGroup
	for w := range workers {
		accounting.Go(func() {
			for i := range calls {
				if (w+i)%2 == 0 {
					f.m.Account("t1", "main", estimated.req, call)
				} else {
					f.m.HarnessTurn("t1", turn)
				}
				f.m.KeepWorking()
				f.m.CheckFailed()
				f.m.Used()
				f.m.TurnsLeft()
			}
		})
	}
	done := make(chan struct{})
	var snapshots sync.WaitGroup
	snapshots.Go(func() {
		for {
			s := f.m.Snapshot(time.Time{}, nil)
			if s.SpendTokens != int64(10*s.TurnsUsed) || s.Tokens.Input+s.Tokens.Output != s.SpendTokens {
				t.Errorf("inconsistent snapshot: %d turns, spend %d, tokens %d+%d", s.TurnsUsed, s.SpendTokens, s.Tokens.Input, s.Tokens.Output)
				return
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	accounting.Wait()
	close(done)
	snapshots.Wait()

	const total = workers * calls
	p := f.m.EndTask(task1())
	if p.Turns != total || p.KeepWorking != total || p.DoneCheck != total || p.Reopens != total {
		t.Errorf("progress %+v, want %d of each", p, total)
	}
	if _, spend := f.m.Used(); spend != 10*total {
		t.Errorf("spend %d, want %d", spend, 10*total)
	}
	counted := testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues("main", "gpt-test", "openai")) +
		testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues(harness.DriverName, "", ""))
	if counted != total {
		t.Errorf("%v inference calls counted, want %d", counted, total)
	}
	if n := len(f.rec.all()); n != total/2 {
		t.Errorf("%d inference records, want %d", n, total/2)
	}
}

// Limit says why a task may make no more inference calls, with the texts the agent loop ends a task with
// and a hook's run_inference is refused with; a hook's call counts like the agent's, turn and spend.
func TestLimitAfterHookCalls(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxTurns           int
		maxTokens          int64
		agentCalls, hooked int
		want               string
	}{
		{"no caps", 0, 0, 3, 3, ""},
		{"a turn left", 3, 0, 1, 1, ""},
		{"turns used, a hook's included", 3, 0, 2, 1, "the task used all 3 turns of inference.max_turns"},
		{"spend reached", 0, 30, 1, 1, "the session has spent 30 tokens, its inference.max_session_tokens ceiling of 30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, agent(func(c *capsule.Capsule) {
				c.Inference.MaxTurns, c.Inference.MaxSessionTokens = tc.maxTurns, tc.maxTokens
			}))
			begin(f.m)
			for range tc.agentCalls {
				f.m.Account("t1", "main", estimated.req, estimated.resp)
			}
			for range tc.hooked {
				in, out := f.m.AccountHook("t1", "main", "local/judge", estimated.req, estimated.resp)
				if in != 10 || out != 5 {
					t.Errorf("AccountHook's tokens %d, %d; want the estimate's 10, 5", in, out)
				}
			}
			if got := f.m.Limit(); got != tc.want {
				t.Errorf("Limit() = %q, want %q", got, tc.want)
			}
			hookRecs := 0
			for _, r := range f.rec.all() {
				if r.Type == "inference" && r.Fields["hook"] == "local/judge" {
					hookRecs++
					if r.Fields["turn"] != tc.agentCalls+hookRecs {
						t.Errorf("the hook's inference record says turn %v, want %d", r.Fields["turn"], tc.agentCalls+hookRecs)
					}
				}
			}
			if hookRecs != tc.hooked {
				t.Errorf("%d inference records naming the hook, want %d", hookRecs, tc.hooked)
			}
		})
	}
}
