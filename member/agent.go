package member

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/runtimetools"
)

// runAgent runs the agent loop for one task: the system prompt, the task text (fenced when untrusted)
// and the staged tool array; then one inference call per turn, each turn's tool calls answered in order,
// until the model ends a turn with no tool call. Its text is the answer.
func (s *Session) runAgent(ctx context.Context, t *a2a.Task, text string) (string, error) {
	inf := s.cfg.Capsule.Inference
	if murmurMeta(t)["trust"] == TrustUntrusted {
		text = fence("task", text, "")
	}
	req := InferRequest{
		System:   s.cfg.Capsule.Instructions,
		Messages: []ChatMessage{{Role: RoleUser, Text: text}},
		Tools:    toolSpecs(s.cfg.Tools),
		Task:     t.History[0].Text(),
	}
	for turn := 1; ; turn++ {
		if inf.MaxTurns > 0 && turn > inf.MaxTurns {
			return "", fmt.Errorf("the task used all %d turns of inference.max_turns without an answer", inf.MaxTurns)
		}
		s.mu.Lock()
		choice := s.choice
		s.mu.Unlock()
		d := s.drivers[choice]
		req.Turn = turn
		resp, err := d.Infer(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", fmt.Errorf("inference (driver choice %s): %v", choice, err)
		}
		s.countInference(d.Name(), resp.Usage)
		if len(resp.Calls) == 0 {
			return resp.Text, nil
		}
		req.Messages = append(req.Messages, ChatMessage{Role: RoleAssistant, Text: resp.Text, Calls: resp.Calls})
		results := make([]ToolResult, 0, len(resp.Calls))
		for _, call := range resp.Calls {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			results = append(results, s.dispatch(ctx, call))
		}
		req.Messages = append(req.Messages, ChatMessage{Role: RoleTool, Results: results})
	}
}

// dispatch answers one tool call through the session's registry. A name that was not staged is refused
// with the message naming the declaration that would have staged it.
func (s *Session) dispatch(ctx context.Context, call ToolCall) ToolResult {
	start := time.Now()
	var res runtimetools.Result
	if tool, ok := s.cfg.Tools.Lookup(call.Name); ok {
		r, err := tool.Run(ctx, runtimetools.Call{ID: call.ID, Name: call.Name, Input: call.Input})
		if err != nil {
			r = runtimetools.Result{Status: runtimetools.StatusError, Output: err.Error()}
		}
		res = r
	} else {
		res = runtimetools.Refused(runtimetools.Unstaged(call.Name, s.cfg.Tools.Names()))
	}
	s.cfg.Metrics.ToolCalls.WithLabelValues(call.Name, res.Status).Inc()
	s.cfg.Metrics.ToolDuration.WithLabelValues(call.Name).Observe(time.Since(start).Seconds())
	return ToolResult{
		CallID: call.ID,
		Tool:   call.Name,
		Status: res.Status,
		Output: res.Output,
		Data:   res.Data,
		Text:   fence("tool:"+call.Name, res.Output, res.Note),
	}
}

// fence wraps content the model must treat as data, not instructions, as SPEC shows; the runtime's note,
// if any, goes on the line after the fence.
func fence(source, content, note string) string {
	var b strings.Builder
	b.WriteString("<untrusted-content source=")
	b.WriteString(source)
	b.WriteString(">\n")
	b.WriteString(content)
	if !strings.HasSuffix(content, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("</untrusted-content>")
	if note != "" {
		b.WriteByte('\n')
		b.WriteString(note)
	}
	return b.String()
}

func toolSpecs(r *runtimetools.Registry) []ToolSpec {
	var out []ToolSpec
	for _, m := range r.Manifests() {
		out = append(out, ToolSpec{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema})
	}
	return out
}

func (s *Session) countInference(driver string, u Usage) {
	m := s.cfg.Metrics
	m.InferenceCalls.WithLabelValues(driver).Inc()
	for kind, n := range map[string]int64{"input": u.Input, "output": u.Output, "cached": u.Cached, "cache_write": u.CacheWrite} {
		if n > 0 {
			m.InferenceTokens.WithLabelValues(driver, kind).Add(float64(n))
		}
	}
}

// buildDrivers makes a driver for every choice the capsule declares that this build can serve. The
// choice a session starts on must be one of them.
func buildDrivers(c *Capsule) (map[string]Driver, error) {
	out := map[string]Driver{}
	for name, ch := range c.Inference.Choices {
		switch ch.Driver {
		case "script":
			sc := DefaultScript()
			if ch.Script != "" {
				var err error
				if sc, err = LoadScript(capsulePath(c.Dir, ch.Script)); err != nil {
					return nil, err
				}
			}
			out[name] = NewScriptDriver(name, sc)
		}
	}
	if _, ok := out[c.Inference.Driver]; !ok {
		ch := c.Inference.Choices[c.Inference.Driver]
		return nil, fmt.Errorf("%s: inference.driver %q uses driver %q, which this build of mur does not serve yet; use a choice with driver: script",
			c.Path, c.Inference.Driver, ch.Driver)
	}
	return out, nil
}
