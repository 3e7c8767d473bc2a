package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/spans/nest"
)

// The events a hook may be called at.
const (
	EventToolCall = "on-tool-call"
	EventTaskEnd  = "on-task-end"
)

// DefaultTimeout bounds one run of a hook when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// MaxAnswer bounds what a hook may write on stdout.
const MaxAnswer = 64 << 10

// Call is one run of a hook's program: what it is told and for whom. A level-2 hook's runner uses Hook
// and Task to answer what the program asks of the session (run_inference, DESIGN §18).
type Call struct {
	Hook  string // the hook's full name
	Event string // EventToolCall or EventTaskEnd
	Task  string // the task it runs for
	Input []byte // on its stdin
	Limit int    // the most its answer may be, in bytes (more is an error)
}

// Runner runs a hook's program once: the call's input on its stdin; what it wrote on stdout, at most
// call.Limit bytes. An error is a run that did not end with an exit code of 0.
type Runner interface {
	Run(ctx context.Context, call Call) ([]byte, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, call Call) ([]byte, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, call Call) ([]byte, error) { return f(ctx, call) }

// Hook is one declared hook.
type Hook struct {
	Name   string   // the full name, scope/name
	Events []string // on-tool-call, on-task-end
	Runner Runner
}

// Recorder writes one record to the session's trace.jsonl.
type Recorder interface {
	Write(typ records.Type, task string, fields map[string]any) error
}

// Config is a session's hooks and how to run them.
type Config struct {
	Hooks    []Hook // in murmur.yaml's order
	Timeout  time.Duration
	Recorder Recorder
}

// Set is a session's hooks.
type Set struct {
	toolCall []Hook
	taskEnd  []Hook
	timeout  time.Duration
	rec      Recorder
}

// New returns the set of cfg's hooks.
func New(cfg Config) (*Set, error) {
	s := &Set{timeout: cfg.Timeout, rec: cfg.Recorder}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	for _, h := range cfg.Hooks {
		if h.Runner == nil {
			return nil, fmt.Errorf("hook %s has no runner", h.Name)
		}
		for _, e := range h.Events {
			switch e {
			case EventToolCall:
				s.toolCall = append(s.toolCall, h)
			case EventTaskEnd:
				s.taskEnd = append(s.taskEnd, h)
			default:
				return nil, fmt.Errorf("hook %s: %q is not a hook event; write on-tool-call or on-task-end", h.Name, e)
			}
		}
	}
	return s, nil
}

// Empty reports whether no hook is called at either event (also for a nil Set).
func (s *Set) Empty() bool { return s == nil || len(s.toolCall)+len(s.taskEnd) == 0 }

// ToolCall is what an on-tool-call hook is told.
type ToolCall struct {
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	Task  string          `json:"task"`
	Trust ids.Trust       `json:"trust"`
}

// Decision is how on-tool-call decided a call.
type Decision struct {
	Allow  bool
	Hook   string // the hook that denied or asked; "" when allowed
	Reason string // why, as the refusal says it
	Failed bool   // the hook failed, which denies
	// Ask: the hook wants the task's sender to approve the call (DESIGN §15): Question is what to ask.
	// Allow is false; the caller asks and decides.
	Ask      bool
	Question string
}

// Refusal is the tool error a denied call returns.
func (d Decision) Refusal() string { return fmt.Sprintf("denied by policy %s: %s", d.Hook, d.Reason) }

// CheckToolCall asks every on-tool-call hook, in order, about call. Every hook must allow; the first
// that denies or fails decides, and writes tool_denied (and hook_failed for a failure). A hook that
// decides ask ({"decision": "ask", "question": "…"}) passes the call on to the hooks after it; when none
// of them denies, the first ask decides: the sender is asked. With no hook the call is allowed.
func (s *Set) CheckToolCall(ctx context.Context, call ToolCall) Decision {
	if s == nil {
		return Decision{Allow: true}
	}
	if len(call.Input) == 0 {
		call.Input = json.RawMessage(`{}`)
	}
	in, _ := json.Marshal(struct {
		Event string `json:"event"`
		ToolCall
	}{EventToolCall, call})
	var ask *Decision
	for _, h := range s.toolCall {
		var ans struct {
			Decision *string `json:"decision"`
			Reason   string  `json:"reason"`
			Question string  `json:"question"`
		}
		d := Decision{Hook: h.Name}
		hctx, span := startRun(ctx, h, EventToolCall, conv.ToolName.String(call.Tool))
		err := s.run(hctx, h, Call{Hook: h.Name, Event: EventToolCall, Task: call.Task, Input: in}, &ans)
		switch {
		case err != nil:
		case ans.Decision == nil:
			err = errors.New(`its answer has no decision; a hook answers {"decision": "allow" | "deny" | "ask", "reason": "…"}`)
		case *ans.Decision == "allow":
			endRun(span, "allow", false, nil)
			continue
		case *ans.Decision == "ask":
			if ask == nil {
				q := strings.TrimSpace(ans.Question)
				if q == "" {
					q = fmt.Sprintf("May the tool %s run?", call.Tool)
				}
				ask = &Decision{Hook: h.Name, Ask: true, Question: q, Reason: strings.TrimSpace(ans.Reason)}
			}
			endRun(span, "ask", false, nil)
			continue
		case *ans.Decision == "deny":
			d.Reason = ans.Reason
			if strings.TrimSpace(d.Reason) == "" {
				d.Reason = "no reason given"
			}
		default:
			err = fmt.Errorf(`its decision %q is none of "allow", "deny" and "ask"`, *ans.Decision)
		}
		if err != nil {
			d.Failed = true
			d.Reason = "the hook failed, which denies: " + err.Error()
			s.record(records.TypeHookFailed, call.Task, map[string]any{"hook": h.Name, "event": EventToolCall, "tool": call.Tool, "error": err.Error()})
			endRun(span, "failed", true, err)
		} else {
			endRun(span, "deny", true, nil)
		}
		s.record(records.TypeToolDenied, call.Task, map[string]any{"hook": h.Name, "tool": call.Tool, "reason": d.Reason, "failed": d.Failed})
		return d
	}
	if ask != nil {
		return *ask
	}
	return Decision{Allow: true}
}

// TaskEnd is what an on-task-end hook is told.
type TaskEnd struct {
	Task    string    `json:"task"`
	Status  string    `json:"status"` // completed, failed, no_answer, canceled, …: task_end's exit_status
	Answer  string    `json:"answer"`
	Reason  string    `json:"reason,omitempty"` // for no_answer, the reason end-without-answer gave
	Trust   ids.Trust `json:"trust"`
	Reopens int       `json:"reopens"` // how often the task was reopened so far
}

// Reopen is an on-task-end hook's request to reopen a task.
type Reopen struct {
	Hook    string
	Message string
}

// CheckTaskEnd asks every on-task-end hook, in order, whether the task should be reopened; the first
// that asks decides. A failing hook does nothing but write hook_failed. ok is false when none asks.
func (s *Set) CheckTaskEnd(ctx context.Context, end TaskEnd) (Reopen, bool) {
	if s == nil {
		return Reopen{}, false
	}
	in, _ := json.Marshal(struct {
		Event string `json:"event"`
		TaskEnd
	}{EventTaskEnd, end})
	for _, h := range s.taskEnd {
		var ans struct {
			Reopen *string `json:"reopen"`
		}
		hctx, span := startRun(ctx, h, EventTaskEnd)
		if err := s.run(hctx, h, Call{Hook: h.Name, Event: EventTaskEnd, Task: end.Task, Input: in}, &ans); err != nil {
			s.record(records.TypeHookFailed, end.Task, map[string]any{"hook": h.Name, "event": EventTaskEnd, "error": err.Error()})
			endRun(span, "failed", false, err)
			continue
		}
		if ans.Reopen != nil && strings.TrimSpace(*ans.Reopen) != "" {
			endRun(span, "reopen", false, nil)
			return Reopen{Hook: h.Name, Message: *ans.Reopen}, true
		}
		endRun(span, "none", false, nil)
	}
	return Reopen{}, false
}

// run runs h with call, within the timeout, and decodes its answer strictly into ans.
func (s *Set) run(ctx context.Context, h Hook, call Call, ans any) error {
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, errTimeout)
	defer cancel()
	call.Limit = MaxAnswer
	out, err := h.Runner.Run(ctx, call)
	if err != nil {
		if errors.Is(context.Cause(ctx), errTimeout) {
			return fmt.Errorf("it did not answer within %s", s.timeout)
		}
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ans); err != nil {
		return fmt.Errorf("its answer is not the JSON object a hook writes: %v (it wrote %q)", err, clip(out))
	}
	if dec.More() {
		return fmt.Errorf("it wrote more than one JSON value (%q)", clip(out))
	}
	return nil
}

var errTimeout = errors.New("hook timeout")

// startRun starts the span of one run of h at event, "murmur.hook {event}", the child of ctx's span (the
// tool call's, or the task's at on-task-end); a WebAssembly hook's module run is its child.
func startRun(ctx context.Context, h Hook, event string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return nest.Start(ctx, conv.SpanHook+" "+event, trace.SpanKindInternal,
		append(attrs, conv.HookName.String(h.Name), conv.HookEvent.String(event))...)
}

// endRun ends a hook run's span with its outcome (allow, deny, ask, failed; reopen, none) and whether
// it refused the tool call; a failed run sets the span's status to an error.
func endRun(span trace.Span, outcome string, denied bool, err error) {
	span.SetAttributes(conv.HookOutcome.String(outcome), conv.HookDenied.Bool(denied))
	if err != nil {
		span.SetAttributes(conv.ErrorType.String("hook_failed"))
		span.SetStatus(codes.Error, clip([]byte(err.Error())))
	}
	span.End()
}

func clip(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (s *Set) record(typ records.Type, task string, fields map[string]any) {
	if s.rec != nil {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = s.rec.Write(typ, task, fields)
	}
}
