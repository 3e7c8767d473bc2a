package spans

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
)

// The kinds of question a task asks its sender (murmur.input.kind).
const (
	InputQuestion = "question" // the model asked (the script driver's ask: turn)
	InputApproval = "approval" // an on-tool-call hook decided ask: may the call run?
)

// InputAsked puts murmur.input.asked on the span of the running task (task): it waits for its sender
// (TASK_STATE_INPUT_REQUIRED). An approval names the tool and the hook that asked; neither the question's
// text nor the call's input goes on the span.
func (st *Tracing) InputAsked(task string, approval bool, tool, hook string) {
	kind, attrs := InputQuestion, []attribute.KeyValue(nil)
	if approval {
		kind, attrs = InputApproval, []attribute.KeyValue{conv.ToolName.String(tool), conv.HookName.String(hook)}
	}
	span := st.taskSpan(task, kind)
	span.AddEvent(conv.EventInputAsked, trace.WithAttributes(append(attrs, conv.InputKind.String(kind))...))
}

// InputAnswered puts murmur.input.answered on the running task's span after InputAsked: the decision of
// an approval (allow, deny) or answered for a question; when no answer came, not_answered (canceled when
// the task was) with the error's type.
func (st *Tracing) InputAnswered(task, decision string, err error) {
	kind := st.answered(task)
	if kind == "" {
		return
	}
	outcome, attrs := "answered", []attribute.KeyValue{conv.InputKind.String(kind)}
	switch {
	case errors.Is(err, context.Canceled):
		outcome = "canceled"
	case err != nil:
		outcome = "not_answered"
		attrs = append(attrs, conv.ErrorType.String(fmt.Sprintf("%T", err)))
	case kind == InputApproval:
		outcome = decision
	}
	st.taskSpan(task, "").AddEvent(conv.EventInputAnswered, trace.WithAttributes(append(attrs, conv.InputOutcome.String(outcome))...))
}

// taskSpan is the span of task when it is the one running (a span that records nothing otherwise), and
// notes the kind of the question it asks ("" leaves it).
func (st *Tracing) taskSpan(task, asking string) trace.Span {
	if st == nil {
		return trace.SpanFromContext(context.Background())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.span == nil || string(st.running) != task {
		return trace.SpanFromContext(context.Background())
	}
	if asking != "" {
		st.asking = asking
	}
	return st.span
}

// answered takes the kind of the question the running task asked; "" when it asked none.
func (st *Tracing) answered(task string) string {
	if st == nil {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	kind := st.asking
	if string(st.running) != task {
		kind = ""
	}
	st.asking = ""
	return kind
}
