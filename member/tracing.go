package member

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
	"github.com/murmur-run/murmur/runtimetools"
)

// sessionTracing is what a session traces with (DESIGN §17): its tracer, the trace context each queued
// task carries from the request that sent it to its run, and the span of the task running now.
type sessionTracing struct {
	tracer trace.Tracer

	mu      sync.Mutex // guards the fields below
	queued  map[a2a.TaskID]carried
	running a2a.TaskID
	span    trace.Span // the running task's invoke_agent span
}

// carried is the trace context of the request that sent a task: its span (a door's server span) and
// its baggage.
type carried struct {
	span trace.Span
	bag  baggage.Baggage
}

// newSessionTracing traces on tp; nil means the global provider (the API's no-op one unless the program
// set up tracing).
func newSessionTracing(tp trace.TracerProvider) *sessionTracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &sessionTracing{tracer: tp.Tracer(conv.TracerName, trace.WithSchemaURL(conv.SchemaURL))}
}

// start starts a span on the session's tracer; a session built without one (tests) traces nothing.
func (st *sessionTracing) start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return st.get().Start(ctx, name, opts...)
}

// get is the session's tracer; a no-op one for a session built without one.
func (st *sessionTracing) get() trace.Tracer {
	if st == nil {
		return noop.Tracer{}
	}
	return st.tracer
}

// keep notes the trace context of the request that queued task id (ctx's), which its run continues
// (take). queue is the session's queue, id in it; keep and take run under the session's lock, so every
// context kept is a queued task's but those of tasks that left the queue without running (canceled
// there), which keep forgets once it finds them. Nothing is kept for a request with no trace context.
func (st *sessionTracing) keep(ctx context.Context, id a2a.TaskID, queue []a2a.TaskID) {
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

// take returns ctx with the trace context kept for task id, which it forgets.
func (st *sessionTracing) take(ctx context.Context, id a2a.TaskID) context.Context {
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

// inTask returns ctx within the running task's span when ctx carries no span of its own and task is the
// one running: a tool call of a harness (transport: process) reaches the session over the tool server,
// whose requests carry no trace context yet.
func (st *sessionTracing) inTask(ctx context.Context, task string) context.Context {
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

// setRunning notes the task running now and its span; "", nil when none runs.
func (st *sessionTracing) setRunning(id a2a.TaskID, span trace.Span) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.running, st.span = id, span
}

// run executes task r (execute) within its invoke_agent span, a child of the span of the request that
// sent it, which ctx carries (next takes it with the task from the queue): one request to the entry
// member is one trace across every member it reaches. The task's records carry the span while it runs
// and up to its task_end.
func (s *Session) run(ctx context.Context, r *runningTask) {
	ctx, span := s.trc.start(ctx, "invoke_agent "+s.cfg.Member, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(conv.OpInvokeAgent, conv.AgentName.String(s.cfg.Member), conv.Member.String(s.cfg.Member),
			conv.A2ATaskID.String(string(r.id))))
	defer span.End()
	if !span.IsRecording() {
		s.execute(ctx, r)
		return
	}
	sc := span.SpanContext()
	s.records.Bind(string(r.id), sc.TraceID().String(), sc.SpanID().String())
	s.trc.setRunning(r.id, span)
	s.execute(ctx, r)
	s.trc.setRunning("", nil)

	s.mu.Lock()
	var state a2a.TaskState
	var contextID, text string
	if t := r.task; t != nil {
		state, contextID = t.Status.State, t.ContextID
		if m := t.Status.Message; m != nil {
			text = m.Text()
		}
	}
	s.mu.Unlock()
	if contextID != "" {
		span.SetAttributes(conv.A2AContextID.String(contextID), conv.ConversationID.String(contextID))
	}
	if state != "" {
		span.SetAttributes(conv.A2ATaskState.String(string(state)))
	}
	if state == a2a.TaskStateFailed {
		span.SetAttributes(conv.ErrorType.String("task_failed"))
		span.SetStatus(codes.Error, clipStatus(text))
	}
}

// noteTurns puts on the task's span (ctx's) how many inference calls the task has made; the agent loop
// and the process transport call it as the run ends, while the meter still counts the task.
func (s *Session) noteTurns(ctx context.Context) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		turns, _ := s.meter.Used()
		span.SetAttributes(conv.Turns.Int(turns))
	}
}

// startChat starts the chat span of one inference call on the driver choice choice (gen_ai.* of the
// semantic conventions): the provider is the choice's driver, the model its model (the script driver,
// which has none, is named by its choice).
func (s *Session) startChat(ctx context.Context, choice string) (context.Context, trace.Span) {
	ch := s.cfg.Capsule.Inference.Choices[choice]
	model, provider := ch.Model, ch.Driver
	if ch.Driver == capsule.DriverScript {
		model, provider = choice, "murmur.script"
	}
	return s.trc.start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(conv.OpChat, conv.ProviderName.String(provider), conv.RequestModel.String(model),
			conv.DriverChoice.String(choice), conv.Member.String(s.cfg.Member)))
}

// endChat ends an inference call's span with the tokens the provider reported (input tokens count the
// cached ones, as the conventions say) or the call's error.
func endChat(span trace.Span, u driver.Usage, err error) {
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

// startTool starts the execute_tool span of one tool call.
func (s *Session) startTool(ctx context.Context, call driver.ToolCall) (context.Context, trace.Span) {
	return s.trc.start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(conv.OpExecuteTool, conv.ToolName.String(call.Name), conv.ToolCallID.String(call.ID),
			conv.Member.String(s.cfg.Member)))
}

// The ways the session itself refuses a tool call, before the tool runs (murmur.tool.refusal).
const (
	refusedUnstaged = "unstaged" // a name the session does not have
	refusedRemoved  = "removed"  // a tool artifact remove-artifact removed
	refusedDenied   = "denied"   // an on-tool-call hook denied it
)

// leadingToken is a refusal's opening token, such as not-granted: (SPEC "Refusals").
var leadingToken = regexp.MustCompile(`^([a-z][a-z0-9]*(?:-[a-z0-9]+)*):`)

// endTool ends a tool call's span with its status; a refused call carries its refusal token: why the
// session refused it (why), or the token the tool's refusal opens with.
func endTool(span trace.Span, res runtimetools.Result, why string) {
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

// spanFields adds the ids of ctx's span to a record's fields when a span is recording, so the record
// joins it rather than its task's.
func spanFields(ctx context.Context, fields map[string]any) {
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
