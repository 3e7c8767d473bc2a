package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/metrics"
)

// mur_tasks_waiting_input counts each task from the change that interrupted it to its next change, by
// the state it waits in; a task this member never saw interrupted is never uncounted.
func TestTasksWaitingInput(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() [2]float64 {
		return [2]float64{testutil.ToFloat64(m.WaitingInput.WithLabelValues("input_required")),
			testutil.ToFloat64(m.WaitingInput.WithLabelValues("auth_required"))}
	}
	for i, step := range []struct {
		id    a2a.TaskID
		state a2a.TaskState
		want  [2]float64
	}{
		{"t1", a2a.TaskStateWorking, [2]float64{0, 0}},
		{"t1", a2a.TaskStateInputRequired, [2]float64{1, 0}},
		{"t1", a2a.TaskStateInputRequired, [2]float64{1, 0}}, // the same state again: counted once
		{"t2", a2a.TaskStateAuthRequired, [2]float64{1, 1}},
		{"t1", a2a.TaskStateWorking, [2]float64{0, 1}},       // answered
		{"t2", a2a.TaskStateInputRequired, [2]float64{1, 0}}, // from one wait to the other
		{"t2", a2a.TaskStateFailed, [2]float64{0, 0}},        // its wait timed out
		{"t3", a2a.TaskStateCanceled, [2]float64{0, 0}},      // read back from the store, never counted here
		{"t1", a2a.TaskStateCompleted, [2]float64{0, 0}},
	} {
		m.TaskState(step.id, step.state)
		if got := waiting(); got != step.want {
			t.Errorf("step %d (%s %s): input_required, auth_required = %v, want %v", i, step.id, step.state, got, step.want)
		}
	}
}
