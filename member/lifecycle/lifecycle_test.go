package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/lifecycle"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/records"
)

var start = time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)

// record is one record the rules wrote.
type record struct {
	Type, Task string
	Fields     map[string]any
}

// recorder keeps what the rules write; it is safe for concurrent use, as a session's records are.
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

// clock is a fake clock the test moves by hand; it is safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.set(t)
	return c
}

func (c *clock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// check is a fake done_check: the results its runs give in turn, the last one again once they run out.
type check struct {
	results []checkResult
	runs    [][]string
}

type checkResult struct {
	out  string
	code int
	err  error
}

func (c *check) run(ctx context.Context, command []string) (string, int, error) {
	c.runs = append(c.runs, command)
	r := c.results[min(len(c.runs), len(c.results))-1]
	return r.out, r.code, r.err
}

// fixture is a session's rules with a running task, and what they use.
type fixture struct {
	rules *lifecycle.Rules
	meter *meter.Meter
	rec   *recorder
	clock *clock
	check *check
}

func newFixture(lc capsule.Lifecycle, deadline time.Duration, results ...checkResult) fixture {
	c := &capsule.Capsule{Inference: &capsule.Inference{}, Lifecycle: lc, Deadline: deadline}
	f := fixture{rec: &recorder{}, clock: newClock(start), check: &check{results: results}}
	f.meter = meter.New(meter.Config{Capsule: c, Now: f.clock.now, Started: start, Record: f.rec.write})
	var at time.Time
	if deadline > 0 {
		at = start.Add(deadline).In(time.FixedZone("UTC+2", 2*60*60)) // the notice gives it in UTC
	}
	f.rules = lifecycle.New(lifecycle.Config{Capsule: c, Deadline: at, Now: f.clock.now, Meter: f.meter,
		RunCheck: f.check.run, Record: f.rec.write})
	f.meter.BeginTask(context.Background(), &a2a.Task{ID: "t1"})
	return f
}

func intp(n int) *int { return &n }

const nudge = "[runtime] You ended your turn without an answer. Keep working on the task, and end your turn with your answer as text when you have it."

func TestNudgeKeepsWorkingUntilTheLimit(t *testing.T) {
	f := newFixture(capsule.Lifecycle{KeepWorking: &capsule.KeepWorking{Limit: 2}}, 0)
	for i := range 2 {
		msg, err := f.rules.Nudge("t1")
		if err != nil || msg != nudge {
			t.Fatalf("nudge %d: Nudge() = %q, %v; want the nudge", i+1, msg, err)
		}
	}
	msg, err := f.rules.Nudge("t1")
	if err == nil || msg != "" {
		t.Fatalf("past the limit: Nudge() = %q, %v; want the task's error", msg, err)
	}
	if want := "the model ended its turn without an answer"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	want := []record{
		{"keep_working", "t1", map[string]any{"used": 1, "left": 1}},
		{"keep_working", "t1", map[string]any{"used": 2, "left": 0}},
	}
	if diff := cmp.Diff(want, f.rec.all()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if p := f.meter.EndTask(&a2a.Task{ID: "t1"}); p.KeepWorking != 2 {
		t.Errorf("the meter counted %d nudges, want 2", p.KeepWorking)
	}
}

func TestNudgeWithoutKeepWorkingEndsTheTask(t *testing.T) {
	f := newFixture(capsule.Lifecycle{}, 0)
	if msg, err := f.rules.Nudge("t1"); err == nil || msg != "" {
		t.Errorf("Nudge() = %q, %v; want the task's error", msg, err)
	}
	if recs := f.rec.all(); len(recs) != 0 {
		t.Errorf("records %v, want none", recs)
	}
}

func TestCheckVerdict(t *testing.T) {
	cmd := []string{"make", "test"}
	for _, tc := range []struct {
		name      string
		dc        *capsule.DoneCheck
		result    checkResult
		wantRuns  int
		wantParts []string // what the reopen message holds; nil: none
		wantRec   map[string]any
	}{
		{name: "no done_check", wantRuns: 0},
		{name: "the check passes", dc: &capsule.DoneCheck{Command: cmd, Limit: 2}, result: checkResult{out: "ok\n"}, wantRuns: 1},
		{
			name: "the check fails", dc: &capsule.DoneCheck{Command: cmd, Limit: 2},
			result: checkResult{out: "ran 3 tests\nFAIL: TestX\n", code: 2}, wantRuns: 1,
			wantParts: []string{"[runtime] The task is not done: its check `make test` exited with status 2.\n",
				"<untrusted-content source=done_check>\nran 3 tests\nFAIL: TestX\n</untrusted-content>\n",
				"Keep working until the check passes, then answer again."},
			wantRec: map[string]any{"reason": "done_check", "command": cmd, "exit_code": 2, "used": 1, "left": 1},
		},
		{
			name: "the check cannot run", dc: &capsule.DoneCheck{Command: cmd, Limit: 3},
			result: checkResult{code: -1, err: errors.New("no such binary")}, wantRuns: 1,
			wantParts: []string{"its check `make test` could not run: no such binary.\n"},
			wantRec:   map[string]any{"reason": "done_check", "command": cmd, "exit_code": -1, "used": 1, "left": 2},
		},
		{
			name: "the check cannot run, with no exit status", dc: &capsule.DoneCheck{Command: cmd, Limit: 3},
			result: checkResult{err: errors.New("sandbox refused")}, wantRuns: 1,
			wantParts: []string{"its check `make test` could not run: sandbox refused.\n"},
			wantRec:   map[string]any{"reason": "done_check", "command": cmd, "exit_code": 0, "used": 1, "left": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(capsule.Lifecycle{DoneCheck: tc.dc}, 0, tc.result)
			msg, err := f.rules.Check(context.Background(), "t1")
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if len(f.check.runs) != tc.wantRuns {
				t.Errorf("the check ran %d times, want %d", len(f.check.runs), tc.wantRuns)
			}
			if tc.wantParts == nil {
				if msg != "" || len(f.rec.all()) != 0 || f.meter.Reopens() != 0 {
					t.Errorf("Check() = %q, records %v, %d reopens; want none of them", msg, f.rec.all(), f.meter.Reopens())
				}
				return
			}
			for _, part := range tc.wantParts {
				if !strings.Contains(msg, part) {
					t.Errorf("reopen message %q lacks %q", msg, part)
				}
			}
			if diff := cmp.Diff([]record{{"task_reopened", "t1", tc.wantRec}}, f.rec.all()); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if n := f.meter.Reopens(); n != 1 {
				t.Errorf("the meter counted %d reopens, want 1", n)
			}
		})
	}
}

func TestFailedCheckReopensUntilItsLimit(t *testing.T) {
	f := newFixture(capsule.Lifecycle{DoneCheck: &capsule.DoneCheck{Command: []string{"make", "test"}, Limit: 2}}, 0,
		checkResult{out: "first\nFAIL: TestX\n", code: 1})
	for i := range 2 {
		if msg, err := f.rules.Check(context.Background(), "t1"); err != nil || msg == "" {
			t.Fatalf("failure %d: Check() = %q, %v; want a reopen", i+1, msg, err)
		}
	}
	msg, err := f.rules.Check(context.Background(), "t1")
	if err == nil || msg != "" {
		t.Fatalf("past the limit: Check() = %q, %v; want the task's error", msg, err)
	}
	want := "lifecycle.done_check `make test` exited with status 1 after 2 reopen(s); the task ends unverified: FAIL: TestX"
	if err.Error() != want {
		t.Errorf("error\n%q, want\n%q", err, want)
	}
	var used []any
	for _, r := range f.rec.all() {
		used = append(used, r.Fields["used"])
	}
	if diff := cmp.Diff([]any{1, 2}, used); diff != "" {
		t.Errorf("task_reopened records' used (-want +got):\n%s", diff)
	}
	if p := f.meter.EndTask(&a2a.Task{ID: "t1"}); p.DoneCheck != 2 || p.Reopens != 2 {
		t.Errorf("the meter counted %d done_check reopens and %d reopens, want 2 and 2", p.DoneCheck, p.Reopens)
	}
}

func TestFailedCheckStopsAtMaxTaskReopens(t *testing.T) {
	f := newFixture(capsule.Lifecycle{MaxTaskReopens: intp(1),
		DoneCheck: &capsule.DoneCheck{Command: []string{"verify"}, Limit: 5}}, 0, checkResult{code: 1})
	if msg, err := f.rules.Check(context.Background(), "t1"); err != nil || msg == "" {
		t.Fatalf("first failure: Check() = %q, %v; want a reopen", msg, err)
	}
	_, err := f.rules.Check(context.Background(), "t1")
	if err == nil || !strings.Contains(err.Error(), "after 1 reopen(s)") {
		t.Errorf("second failure: error %v, want the task's error after 1 reopen", err)
	}
}

func TestCheckEndedContextIsTheError(t *testing.T) {
	f := newFixture(capsule.Lifecycle{DoneCheck: &capsule.DoneCheck{Command: []string{"verify"}, Limit: 5}}, 0,
		checkResult{code: -1, err: errors.New("killed")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg, err := f.rules.Check(ctx, "t1")
	if !errors.Is(err, context.Canceled) || msg != "" {
		t.Errorf("Check() = %q, %v; want context.Canceled", msg, err)
	}
	if n := f.meter.Reopens(); n != 0 || len(f.rec.all()) != 0 {
		t.Errorf("%d reopens and records %v, want none", n, f.rec.all())
	}
}

func TestDeadlineNoticeOnceInsideTheMargin(t *testing.T) {
	// A 10-minute deadline at 12:10, with a notice margin of 60 seconds.
	f := newFixture(capsule.Lifecycle{DeadlineNoticeSecs: intp(60)}, 10*time.Minute)
	deadline := start.Add(10 * time.Minute)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{start, ""},
		{deadline.Add(-61 * time.Second), ""},
		{deadline.Add(-60 * time.Second), "Session deadline: the runtime ends this session at 2026-10-20T12:10:00Z, in 60 seconds."},
		{deadline.Add(-59 * time.Second), ""}, // given once
		{deadline.Add(time.Second), ""},
	} {
		f.clock.set(tc.at)
		if got := f.rules.Notice("t1"); got != tc.want {
			t.Errorf("at %s: Notice() = %q, want %q", tc.at.Format(time.TimeOnly), got, tc.want)
		}
	}
	want := []record{{"deadline_notice", "t1", map[string]any{"at": "2026-10-20T12:10:00Z", "left_secs": int64(60)}}}
	if diff := cmp.Diff(want, f.rec.all()); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestDeadlineNoticeWhen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		secs     *int
		deadline time.Duration
		elapsed  time.Duration // since the session started, when the tool result comes
		want     string
	}{
		{"no deadline", nil, 0, time.Hour, ""},
		{"deadline_notice_secs 0", intp(0), 10 * time.Minute, 10 * time.Minute, ""},
		{"the default margin: a tenth of the deadline", nil, 10 * time.Minute, 9 * time.Minute,
			"Session deadline: the runtime ends this session at 2026-10-20T12:10:00Z, in 60 seconds."},
		{"before the default margin", nil, 10 * time.Minute, 9*time.Minute - time.Second, ""},
		{"past the deadline", intp(60), 10 * time.Minute, 11 * time.Minute,
			"Session deadline: the runtime ends this session at 2026-10-20T12:10:00Z, in 0 seconds."},
		{"a part second is left out", intp(60), 10 * time.Minute, 9*time.Minute + 30*time.Second + time.Millisecond,
			"Session deadline: the runtime ends this session at 2026-10-20T12:10:00Z, in 29 seconds."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(capsule.Lifecycle{DeadlineNoticeSecs: tc.secs}, tc.deadline)
			f.clock.add(tc.elapsed)
			if got := f.rules.Notice("t1"); got != tc.want {
				t.Errorf("Notice() = %q, want %q", got, tc.want)
			}
			if n, want := len(f.rec.all()), min(len(tc.want), 1); n != want {
				t.Errorf("%d records, want %d", n, want)
			}
		})
	}
}

func TestDeadlineNoticeOnceAcrossGoroutines(t *testing.T) {
	f := newFixture(capsule.Lifecycle{DeadlineNoticeSecs: intp(60)}, 10*time.Minute)
	f.clock.add(10*time.Minute - 30*time.Second)
	var given atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if f.rules.Notice("t1") != "" {
					given.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := given.Load(); n != 1 {
		t.Errorf("the notice was given %d times, want once", n)
	}
	if n := len(f.rec.all()); n != 1 {
		t.Errorf("%d deadline_notice records, want 1", n)
	}
}
