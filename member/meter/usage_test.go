package meter_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/usage"
)

// A task's usage holds the tokens of its own inference calls (the agent loop's, a hook's, the
// harness's turns; an unreported call counts as a call and nothing more) apart from those of what it
// caused: the latest reading of each call or delegation, which replaces the one before. EndTask puts it
// in the task's metadata.murmur.usage; a reading for another task counts nowhere.
func TestTaskUsageRollsUp(t *testing.T) {
	f := newFixture(t, agent(nil))
	task := task1()
	task.Metadata = map[string]any{ids.Meta: map[string]any{"member": "lead"}}
	f.m.BeginTask(context.Background(), task)
	f.m.Account("t1", "main", estimated.req, driver.InferResponse{Usage: driver.Usage{Input: 100, Output: 20, Cached: 7, CacheWrite: 3, Reported: true, CacheReported: true}})
	f.m.Account("t1", "main", estimated.req, estimated.resp)
	f.m.AccountHook("t1", "main", "judge", estimated.req, driver.InferResponse{Usage: driver.Usage{Input: 10, Output: 1, Reported: true}})
	f.m.HarnessTurn("t1", harness.Usage{Input: 5, Output: 2, Reported: true})

	worker := usage.Of(usage.Tokens{Input: 40, Output: 4, Calls: 1}, usage.Tokens{Input: 9, Output: 1, Calls: 1}, 1)
	f.m.Caused("t1", "mcl_1", usage.Of(usage.Tokens{Input: 1, Calls: 1}, usage.Tokens{}, 0)) // read while it ran
	f.m.Caused("t1", "mcl_1", worker)                                                        // its end
	f.m.Caused("t1", "dlg_1", usage.Of(usage.Tokens{Input: 3, Output: 3, Calls: 1}, usage.Tokens{}, 0))
	f.m.Caused("t0", "mcl_0", worker) // another task's: dropped

	self := usage.Tokens{Input: 115, Output: 23, Cached: 7, CacheWrite: 3, Calls: 4, Unreported: 1}
	caused := usage.Tokens{Input: 52, Output: 8, Calls: 3}
	want := usage.Usage{Self: self, Caused: caused, Total: self.Add(caused), Tasks: 3}
	if got, ok := f.m.Usage(); !ok || !cmp.Equal(got, want) {
		t.Errorf("Usage() while it runs = %+v, %v; want %+v", got, ok, want)
	}
	other := &a2a.Task{ID: "t2", Metadata: map[string]any{}}
	f.m.Stamp(other)
	if len(other.Metadata) != 0 {
		t.Errorf("Stamp of a task that does not run wrote %v", other.Metadata)
	}
	p := f.m.EndTask(task)
	if diff := cmp.Diff(want, p.Usage()); diff != "" {
		t.Errorf("EndTask's Usage() (-want +got):\n%s", diff)
	}
	got, ok := usage.Read(ids.Murmur(task.Metadata))
	if !ok {
		t.Fatalf("the task's metadata has no usage: %v", task.Metadata)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata.murmur.usage (-want +got):\n%s", diff)
	}
	if _, isMap := ids.Get(ids.Murmur(task.Metadata), ids.MetaUsage).(map[string]any); !isMap {
		t.Errorf("metadata.murmur.usage is a %T, not JSON's own map as a stored task has it", ids.Get(ids.Murmur(task.Metadata), ids.MetaUsage))
	}
	if _, ok := f.m.Usage(); ok {
		t.Error("Usage() after EndTask reports a task")
	}
	f.m.Caused("t1", "mcl_2", worker) // late: the task ended
	if _, ok := f.m.Usage(); ok {
		t.Error("a late reading started a task")
	}
}

// A task that runs in a recorded span names its trace in metadata.murmur.trace_id; one that runs in no
// span, or in one the sampler left out, names none.
func TestBeginTaskNamesTheTrace(t *testing.T) {
	f := newFixture(t, agent(nil))
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "invoke_agent lead")
	defer span.End()
	task := task1()
	f.m.BeginTask(ctx, task)
	f.m.EndTask(task)
	if got := ids.Get(ids.Murmur(task.Metadata), ids.MetaTraceID); got != span.SpanContext().TraceID().String() {
		t.Errorf("metadata.murmur.trace_id = %v, want %s", got, span.SpanContext().TraceID())
	}

	off := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer off.Shutdown(context.Background())
	for name, ctx := range map[string]context.Context{"no span": context.Background(), "not sampled": func() context.Context {
		ctx, _ := off.Tracer("test").Start(context.Background(), "invoke_agent lead")
		return ctx
	}()} {
		task := task1()
		f.m.BeginTask(ctx, task)
		f.m.EndTask(task)
		if _, ok := ids.Lookup(ids.Murmur(task.Metadata), ids.MetaTraceID); ok {
			t.Errorf("%s: the task names a trace: %v", name, task.Metadata)
		}
	}
}

// The inference series carry the model and the provider of the driver choice that served the call: the
// chat span's names for them; none for the script driver's model or the harness.
func TestInferenceSeriesNameModelAndProvider(t *testing.T) {
	f := newFixture(t, agent(func(c *capsule.Capsule) {
		c.Inference.Choices["claude"] = capsule.Choice{Driver: capsule.DriverAnthropic, Model: "claude-test"}
		c.Inference.Choices["offline"] = capsule.Choice{Driver: capsule.DriverScript}
	}))
	begin(f.m)
	reported := driver.InferResponse{Usage: driver.Usage{Input: 4, Output: 2, Reported: true}}
	f.m.Account("t1", "main", estimated.req, reported)
	f.m.Account("t1", "claude", estimated.req, reported)
	f.m.Account("t1", "offline", estimated.req, reported)
	f.m.HarnessTurn("t1", harness.Usage{Input: 4, Output: 2, Reported: true})
	for _, l := range [][3]string{{"main", "gpt-test", "openai"}, {"claude", "claude-test", "anthropic"}, {"offline", "", "murmur.script"}, {harness.DriverName, "", ""}} {
		if n := testutil.ToFloat64(f.series.InferenceCalls.WithLabelValues(l[0], l[1], l[2])); n != 1 {
			t.Errorf("mur_inference_calls_total%v = %v, want 1", l, n)
		}
		if n := testutil.ToFloat64(f.series.InferenceTokens.WithLabelValues(l[0], l[1], l[2], "input")); n != 4 {
			t.Errorf("mur_inference_tokens_total%v input = %v, want 4", l, n)
		}
	}
	if n := testutil.CollectAndCount(f.series.InferenceCalls); n != 4 {
		t.Errorf("%d call series, want one per choice and the harness's", n)
	}
}
