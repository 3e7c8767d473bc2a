// Package spans is what a member's session traces (DESIGN §17): its tracer, the trace context a queued
// task carries from the request that sent it to its run, and the spans of a task's run (invoke_agent),
// of an inference call (chat) and of a tool call (execute_tool), named and attributed by the
// OpenTelemetry semantic conventions that internal/telemetry/conv pins. It uses the OpenTelemetry API
// only: with tracing off every span is the API's no-op one.
//
// The spans of the work inside a task are here too: a sub-session's run under its delegation
// (Delegated), a command's life in the background (EndCall, BackgroundEnded), the events of a question
// to the task's sender (InputAsked, InputAnswered), a hook's inference call (StartHookChat); the spans of
// hooks, modules and plans are started where they run, through package nest.
//
// Imports: a2a, internal/telemetry/conv, member/capsule, member/driver, member/records,
// member/spans/nest, runtimetools; never member.
package spans

import (
	"context"
	"errors"
	"regexp"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/spans/nest"
	"github.com/murmur-run/murmur/runtimetools"
)

// Tracing is what a session traces with (DESIGN §17): its tracer, the trace context each queued
// task carries from the request that sent it to its run, and the span of the task running now.
type Tracing struct {
	tracer trace.Tracer

	mu         sync.Mutex // guards the fields below
	queued     map[a2a.TaskID]carried
	running    a2a.TaskID
	span       trace.Span            // the running task's invoke_agent span
	delegation *Delegation           // the delegation a sub-session serves (Delegated); nil for a member's
	asking     string                // the kind of the running task's question to its sender; "" when none
	background map[string]background // the commands moved to the background, by work id (background.go)
}

// carried is the trace context of the request that sent a task: its span (a door's server span) and
// its baggage.
type carried struct {
	span trace.Span
	bag  baggage.Baggage
}

// New traces on tp; nil means the global provider (the API's no-op one unless the program
// set up tracing).
func New(tp trace.TracerProvider) *Tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracing{tracer: tp.Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL))}
}

// Start starts a span on the session's tracer; a session built without one (tests) traces nothing.
func (st *Tracing) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return st.Tracer().Start(ctx, name, opts...)
}

// Tracer is the session's tracer; a no-op one for a session built without one.
func (st *Tracing) Tracer() trace.Tracer {
	if st == nil {
		return noop.Tracer{}
	}
	return st.tracer
}

// Keep notes the trace context of the request that queued task id (ctx's), which its run continues
// (Take). queue is the session's queue, id in it; Keep and Take run under the session's lock, so every
// context kept is a queued task's but those of tasks that left the queue without running (canceled
// there), which Keep forgets once it finds them. Nothing is kept for a request with no trace context.
func (st *Tracing) Keep(ctx context.Context, id a2a.TaskID, queue []a2a.TaskID) {
	c := carried{span: trace.SpanFromContext(ctx), bag: baggage.FromContext(ctx)}
	if st == nil || !c.span.SpanContext().IsValid() && c.bag.Len() == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.queued == nil {
		st.queued = map[a2a.TaskID]carried{}
	}
	if len(st.queued) >= len(queue) { // more than the queue's others: some left it
		in := make(map[a2a.TaskID]bool, len(queue))
		for _, q := range queue {
			in[q] = true
		}
		for k := range st.queued {
			if !in[k] {
				delete(st.queued, k)
			}
		}
	}
	st.queued[id] = c
}

// Take returns ctx with the trace context kept for task id, which it forgets.
func (st *Tracing) Take(ctx context.Context, id a2a.TaskID) context.Context {
	if st == nil {
		return ctx
	}
	st.mu.Lock()
	c, ok := st.queued[id]
	delete(st.queued, id)
	st.mu.Unlock()
	if !ok {
		return ctx
	}
	if c.bag.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, c.bag)
	}
	return trace.ContextWithSpan(ctx, c.span)
}

// InTask returns ctx within the running task's span when ctx carries no span of its own and task is the
// one running: a tool call of a harness (transport: process) reaches the session over the tool server,
// whose requests carry no trace context yet.
func (st *Tracing) InTask(ctx context.Context, task string) context.Context {
	if st == nil || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.span == nil || string(st.running) != task {
		return ctx
	}
	return trace.ContextWithSpan(ctx, st.span)
}

// SetRunning notes the task running now and its span; "", nil when none runs.
func (st *Tracing) SetRunning(id a2a.TaskID, span trace.Span) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.running, st.span, st.asking = id, span, ""
}

// StartAgent starts the invoke_agent span of one run of task id of member; in a sub-session (Delegated)
// the agent is named member/capsule and the span carries its delegation. Work nested in the run (a
// hook's run, a module's) is named for member (package nest).
func (st *Tracing) StartAgent(ctx context.Context, member string, id a2a.TaskID) (context.Context, trace.Span) {
	agent, attrs := member, []attribute.KeyValue{conv.OpInvokeAgent, conv.Member.String(member), conv.A2ATaskID.String(string(id))}
	if d := st.delegated(); d != nil {
		agent = member + "/" + d.Capsule
		attrs = append(attrs, conv.DelegationID.String(d.ID), conv.DelegationCapsule.String(d.Capsule), conv.DelegationDepth.Int(d.Depth))
	}
	ctx, span := st.Start(ctx, "invoke_agent "+agent, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(attrs, conv.AgentName.String(agent))...))
	return inMember(ctx, span, member), span
}

// inMember names member in ctx for the spans nested below span, when span records.
func inMember(ctx context.Context, span trace.Span, member string) context.Context {
	if !span.IsRecording() {
		return ctx
	}
	return nest.WithMember(ctx, member)
}

// EndAgent puts on a task's span how its run ended: t as it stands (nil: not known); a failed task
// sets the span's status to an error with its status text. It does not end the span.
func EndAgent(span trace.Span, t *a2a.Task) {
	if t == nil || !span.IsRecording() {
		return
	}
	if t.ContextID != "" {
		span.SetAttributes(conv.A2AContextID.String(t.ContextID), conv.ConversationID.String(t.ContextID))
	}
	if t.Status.State != "" {
		span.SetAttributes(conv.A2ATaskState.String(string(t.Status.State)))
	}
	if t.Status.State == a2a.TaskStateFailed {
		text := ""
		if m := t.Status.Message; m != nil {
			text = m.Text()
		}
		span.SetAttributes(conv.ErrorType.String("task_failed"))
		span.SetStatus(codes.Error, clipStatus(text))
	}
}

// NoteTurns puts on the task's span (ctx's) how many inference calls the task has made.
func NoteTurns(ctx context.Context, turns int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(conv.Turns.Int(turns))
	}
}

// StartChat starts the chat span of one inference call of member on its driver choice choice, ch
// (gen_ai.* of the semantic conventions): the provider is the choice's driver, the model its model (the
// script driver, which has none, is named by its choice).
func (st *Tracing) StartChat(ctx context.Context, member, choice string, ch capsule.Choice) (context.Context, trace.Span) {
	model, attrs := chat(choice, ch)
	return st.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, conv.Member.String(member))...))
}

// StartHookChat starts the chat span of a hook's inference call (run_inference, DESIGN §18) on its
// driver choice, as the child of ctx's span (the module's run), as package nest starts spans; end it
// with EndChat.
func StartHookChat(ctx context.Context, hook, choice string, ch capsule.Choice) (context.Context, trace.Span) {
	model, attrs := chat(choice, ch)
	return nest.Start(ctx, "chat "+model, trace.SpanKindClient, append(attrs, conv.HookName.String(hook))...)
}

// chat is the model an inference call on driver choice ch goes to, as its span names it, and the span's
// attributes (gen_ai.* of the semantic conventions): the provider is the choice's driver, the model its
// model (the script driver, which has none, is named by its choice).
func chat(choice string, ch capsule.Choice) (string, []attribute.KeyValue) {
	model, provider := ch.Model, ch.Driver
	if ch.Driver == capsule.DriverScript {
		model, provider = choice, "murmur.script"
	}
	return model, []attribute.KeyValue{conv.OpChat, conv.ProviderName.String(provider), conv.RequestModel.String(model),
		conv.DriverChoice.String(choice)}
}

// EndChat ends an inference call's span with the tokens the provider reported (input tokens count the
// cached ones, as the conventions say) or the call's error.
func EndChat(span trace.Span, u driver.Usage, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		kind := "_OTHER"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			kind = "canceled"
		}
		span.SetAttributes(conv.ErrorType.String(kind))
		span.SetStatus(codes.Error, clipStatus(err.Error()))
		return
	}
	if !u.Reported {
		return
	}
	in := u.Input
	if u.CacheApart {
		in += u.Cached + u.CacheWrite
	}
	attrs := []attribute.KeyValue{conv.InputTokens.Int64(in), conv.OutputTokens.Int64(u.Output)}
	if u.CacheReported {
		attrs = append(attrs, conv.CacheReadTokens.Int64(u.Cached), conv.CacheCreatedTokens.Int64(u.CacheWrite))
	}
	span.SetAttributes(attrs...)
}

// StartTool starts the execute_tool span of one tool call of member.
func (st *Tracing) StartTool(ctx context.Context, member string, call driver.ToolCall) (context.Context, trace.Span) {
	ctx, span := st.Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(conv.OpExecuteTool, conv.ToolName.String(call.Name), conv.ToolCallID.String(call.ID),
			conv.Member.String(member)))
	conv.FillSpanSlot(ctx) // a harness's call: its MCP result names this span
	return inMember(ctx, span, member), span
}

// The ways the session itself refuses a tool call, before the tool runs (murmur.tool.refusal).
const (
	RefusedUnstaged = "unstaged" // a name the session does not have
	RefusedRemoved  = "removed"  // a tool artifact remove-artifact removed
	RefusedDenied   = "denied"   // an on-tool-call hook denied it
)

// leadingToken is a refusal's opening token, such as not-granted: (SPEC "Refusals").
var leadingToken = regexp.MustCompile(`^([a-z][a-z0-9]*(?:-[a-z0-9]+)*):`)

// EndTool ends a tool call's span with its status; a refused call carries its refusal token: why the
// session refused it (why), or the token the tool's refusal opens with.
func EndTool(span trace.Span, res runtimetools.Result, why string) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(conv.ToolStatus.String(res.Status))
	switch res.Status {
	case runtimetools.StatusRefused:
		if why == "" {
			why = "refused"
			if m := leadingToken.FindStringSubmatch(res.Output); m != nil {
				why = m[1]
			}
		}
		span.SetAttributes(conv.Refusal.String(why), conv.ErrorType.String("refused"))
		span.SetStatus(codes.Error, "refused: "+why)
	case runtimetools.StatusError:
		span.SetAttributes(conv.ErrorType.String("tool_error"))
		span.SetStatus(codes.Error, clipStatus(res.Output))
	}
}

// Fields adds the ids of ctx's span to a record's fields when a span is recording, so the record
// joins it rather than its task's.
func Fields(ctx context.Context, fields map[string]any) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	sc := span.SpanContext()
	fields[records.TraceIDKey], fields[records.SpanIDKey] = sc.TraceID().String(), sc.SpanID().String()
}

// clipStatus bounds a span's status description: the start of a long error says what went wrong.
func clipStatus(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
