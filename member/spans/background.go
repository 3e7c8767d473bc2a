package spans

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/spans/nest"
	"github.com/murmur-run/murmur/runtimetools"
)

// background is a command that moved to the background, between the two calls that pair up for it
// (EndCall and BackgroundEnded, in either order): the span of its life there once EndCall saw it move,
// or how it ended when it ended first.
type background struct {
	span     trace.Span
	state    string
	exitCode int
}

// EndCall ends a tool call's span as EndTool does. When the call was a shell binary's whose command
// outlived lifecycle.shell_grace_secs and moved to the background, it first starts the span of the
// command's life there, "murmur.background {tool}", the child of the call's span (ctx's), which
// BackgroundEnded ends when the command exits.
func (st *Tracing) EndCall(ctx context.Context, span trace.Span, tool string, res runtimetools.Result, why string) {
	if id, ok := movedTo(res); ok && st != nil {
		_, bg := nest.Start(ctx, conv.SpanBackground+" "+tool, trace.SpanKindInternal,
			conv.ProcessCommand.String(tool), conv.BackgroundWorkID.String(id))
		st.mu.Lock()
		b, ended := st.background[id]
		if ended {
			delete(st.background, id)
		} else {
			if st.background == nil {
				st.background = map[string]background{}
			}
			st.background[id] = background{span: bg}
		}
		st.mu.Unlock()
		if ended {
			endBackground(bg, b.state, b.exitCode)
		}
	}
	EndTool(span, res, why)
}

// BackgroundEnded ends the span of the background command workID, which ended in state (exited,
// stopped) with exitCode; a command that exits with a code other than 0 by itself sets the span's status
// to an error.
func (st *Tracing) BackgroundEnded(workID, state string, exitCode int) {
	if st == nil {
		return
	}
	st.mu.Lock()
	b, moved := st.background[workID]
	if moved {
		delete(st.background, workID)
	} else {
		if st.background == nil {
			st.background = map[string]background{}
		}
		st.background[workID] = background{state: state, exitCode: exitCode}
	}
	st.mu.Unlock()
	if moved {
		endBackground(b.span, state, exitCode)
	}
}

func endBackground(span trace.Span, state string, exitCode int) {
	span.SetAttributes(conv.BackgroundState.String(state), conv.ProcessExitCode.Int(exitCode))
	if state == "exited" && exitCode != 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("exit code %d", exitCode))
	}
	span.End()
}

// movedTo is the work id of a shell call's command that moved to the background: the call's data is
// then {"work_id": …, "state": "running"} (runtimetools.Shell), and only then (background-command's
// data has more keys).
func movedTo(res runtimetools.Result) (string, bool) {
	m, ok := res.Data.(map[string]any)
	if !ok || len(m) != 2 || m["state"] != "running" {
		return "", false
	}
	id, ok := m["work_id"].(string)
	return id, ok
}
