package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/a2a"
)

// Series are the task, inference and tool series of one member (DESIGN §8). The registerer a session is
// given already carries the member label.
type Series struct {
	TasksTotal      *prometheus.CounterVec
	TasksActive     prometheus.Gauge
	TaskDuration    *prometheus.HistogramVec
	InferenceCalls  *prometheus.CounterVec
	InferenceTokens *prometheus.CounterVec
	ToolCalls       *prometheus.CounterVec
	ToolDuration    *prometheus.HistogramVec

	MemberCalls        *prometheus.CounterVec
	MemberCallDuration *prometheus.HistogramVec
	BackgroundCommands *prometheus.GaugeVec
	ArtifactPulls      *prometheus.CounterVec
	Delegations        *prometheus.CounterVec

	// WaitingInput is mur_tasks_waiting_input: the tasks waiting for input, by state (input_required,
	// auth_required), as TaskState tells it.
	WaitingInput *prometheus.GaugeVec
	waiting      waiting
}

// New builds the member's series and registers them on reg.
func New(reg prometheus.Registerer) (*Series, error) {
	m := &Series{
		TasksTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "tasks_total",
			Help: "Tasks that reached each terminal state."}, []string{"state"}),
		TasksActive: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "mur", Name: "tasks_active",
			Help: "Tasks submitted or working."}),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mur", Name: "task_duration_seconds",
			Help: "Time from a task's submission to its terminal state.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"state"}),
		InferenceCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "inference_calls_total",
			Help: "Inference calls, by driver choice, model and provider (empty where the driver names none)."}, []string{"driver", "model", "provider"}),
		InferenceTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "inference_tokens_total",
			Help: "Tokens of inference calls, by driver choice, model, provider and kind (input, output, cached, cache_write)."}, []string{"driver", "model", "provider", "kind"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "tool_calls_total",
			Help: "Tool calls, by tool and status."}, []string{"tool", "status"}),
		ToolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mur", Name: "tool_call_duration_seconds",
			Help: "Time a tool call took.", Buckets: prometheus.DefBuckets}, []string{"tool"}),
	}
	m.MemberCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "member_calls_total",
		Help: "call-member calls, by callee and how they ended."}, []string{"callee", "status"})
	m.MemberCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mur", Name: "member_call_duration_seconds",
		Help: "Time from a call-member call to its end.", Buckets: prometheus.ExponentialBuckets(0.05, 4, 9)}, []string{"callee"})
	m.BackgroundCommands = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mur", Name: "background_commands",
		Help: "Shell commands that moved to the background, by state (running, exited, stopped)."}, []string{"state"})
	m.ArtifactPulls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "artifact_pulls_total",
		Help: "pull-artifact pulls, by the artifact's runtime (tool, skill; unknown when refused before it was read) and result (ok, or the refusal's token)."}, []string{"runtime", "result"})
	m.Delegations = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mur", Name: "delegations_total",
		Help: "delegate-task delegations, by sub-capsule and how they ended."}, []string{"capsule", "status"})
	m.WaitingInput = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mur", Name: "tasks_waiting_input",
		Help: "Tasks waiting for input from their sender, by state (input_required, auth_required)."}, []string{"state"})
	for _, c := range []prometheus.Collector{m.Delegations, m.TasksTotal, m.TasksActive, m.TaskDuration, m.InferenceCalls,
		m.InferenceTokens, m.ToolCalls, m.ToolDuration, m.MemberCalls, m.MemberCallDuration, m.BackgroundCommands, m.ArtifactPulls,
		m.WaitingInput} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, s := range []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected} {
		m.TasksTotal.WithLabelValues(string(s))
	}
	for _, s := range interrupted {
		m.WaitingInput.WithLabelValues(stateLabel(s))
	}
	return m, nil
}
