package member

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/plan"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/spans"
	"github.com/murmur-run/murmur/runtimetools"
)

// runAgent runs the agent loop for one task: the system prompt, the task text (fenced when untrusted)
// and the staged tool array; then one inference call per turn, each turn's tool calls answered in order,
// until the model ends a turn with no tool call. That turn's text is the answer, once keep_working and
// done_check (when the capsule sets them) have had their say.
func (s *Session) runAgent(ctx context.Context, t *a2a.Task, text string) (string, error) {
	text = fenceUntrusted(t, "task", text)
	// A task in an existing context starts with that conversation (DESIGN §15); hist counts its messages,
	// which compaction removes first.
	earlier := s.history(ctx, t)
	hist := len(earlier)
	req := driver.InferRequest{
		System:   s.systemPrompt(),
		Messages: append(earlier, driver.ChatMessage{Role: driver.RoleUser, Text: text}),
		Tools:    s.toolSpecsNow(),
		Task:     t.History[0].Text(),
	}
	task := string(t.ID)
	a, endAttempt := s.begin(ctx, t)
	defer endAttempt()
	defer s.noteTurns(ctx)
	for {
		resp, err := s.infer(ctx, task, &req, &hist)
		if err != nil {
			return "", err
		}
		if resp.Ask != "" {
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleAssistant, Text: resp.Ask})
			reply, err := s.askSender(ctx, task, converse.Question{Text: resp.Ask})
			if err != nil {
				return "", err
			}
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: fenceUntrusted(t, "input", reply.Text)})
			continue
		}

		if len(resp.Calls) > 0 {
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleAssistant, Text: resp.Text, Calls: resp.Calls})
			results := make([]driver.ToolResult, 0, len(resp.Calls))
			for _, call := range resp.Calls {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				results = append(results, s.dispatch(ctx, task, call))
			}
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleTool, Results: results})
			if err := a.NoAnswer(); err != nil {
				// An on-task-end hook may reopen an attempt that ends without an answer (SPEC).
				if msg, ok := a.Reopen(ctx); ok {
					req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: msg})
					continue
				}
				return "", err
			}
			continue
		}

		answer := resp.Text
		req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleAssistant, Text: answer})
		// Calls or delegations still out, or ended and not yet delivered: with a turn left, wait for all
		// of them and continue once, answers first (SPEC "How the answer arrives").
		if a.Outstanding() && s.meter.TurnsLeft() {
			text, answers, err := a.Resume(ctx, func(text string) { s.workingStatus(t, text) })
			if err != nil {
				return "", err
			}
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: text})
			req.Answers = answers
			continue
		}
		// An empty answer gets keep_working's nudge, an answer done_check's verdict (package lifecycle).
		var reopen string
		if strings.TrimSpace(answer) == "" {
			reopen, err = s.rules.Nudge(task)
		} else {
			reopen, err = s.rules.Check(ctx, task)
		}
		if err != nil {
			return "", err
		}
		if reopen != "" {
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: reopen})
			continue
		}
		// SPEC: a task that answers in text while a member it called gave no answer completes, and names
		// those members in metadata.murmur.noAnswerBelow, so its caller reads the answer with a gap line.
		if msg, ok := a.Completed(ctx, answer); ok {
			req.Messages = append(req.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: msg})
			continue
		}
		a.MarkNoAnswerBelow(t)
		if resp.Data != nil {
			s.meter.SetData(resp.Data)
		}
		return answer, nil
	}
}

// infer makes the inference call of one turn of task: within the turn and spend limits, on the driver
// choice of the next call (control_applied when it is a new one), with the tool array and skills
// refreshed and the conversation compacted (hist counts the messages of its context's earlier tasks,
// which go first), in its chat span; the answer is counted in the session's numbers.
func (s *Session) infer(ctx context.Context, task string, req *driver.InferRequest, hist *int) (driver.InferResponse, error) {
	inf := s.cfg.Capsule.Inference
	turns, spend := s.meter.Used()
	choice, applied := s.choice.Next()
	if inf.MaxTurns > 0 && turns >= inf.MaxTurns {
		return driver.InferResponse{}, fmt.Errorf("%s without an answer", meter.TurnsUsedUp(inf.MaxTurns))
	}
	if inf.MaxSessionTokens > 0 && spend >= inf.MaxSessionTokens {
		return driver.InferResponse{}, fmt.Errorf("%s; the task ends without an answer", meter.SpendReached(spend, inf.MaxSessionTokens))
	}
	if applied {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = s.records.Write(records.TypeControlApplied, task, map[string]any{"setting": string(ids.SettingInferenceDriver), "value": choice})
	}
	s.art.Refresh(task, s.tools.Manifests(), req, s.systemPrompt)
	s.meter.Compact(task, req, hist)
	req.Turn = turns + 1
	ictx, span := s.trc.StartChat(ctx, s.cfg.Member, choice, inf.Choices[choice])
	resp, err := s.drivers[choice].Infer(ictx, *req)
	spans.EndChat(span, resp.Usage, err)
	if err != nil {
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		return resp, fmt.Errorf("inference (driver choice %s): %w", choice, err)
	}
	s.meter.Account(task, choice, *req, resp)
	return resp, nil
}

// workingStatus stores a WORKING status message for the running task, as its stream would show it.
func (s *Session) workingStatus(t *a2a.Task, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStatus(t, a2a.TaskStateWorking, text, s.cfg.Now())
	s.storeLocked(t)
}

// systemPrompt is the capsule's instructions, then its skills (the operator's, then those the agent
// pulled, fenced as untrusted); the plan guidance joins it with its feature.
func (s *Session) systemPrompt() string {
	_, planning := s.tools.Lookup("submit-plan")
	return artifact.AppendSkills(plan.WithGuidance(s.cfg.Capsule.Instructions, planning), s.art.Skills())
}

// dispatch answers one tool call through the session's registry. A name that was not staged is refused
// with the message naming the declaration that would have staged it.
func (s *Session) dispatch(ctx context.Context, task string, call driver.ToolCall) driver.ToolResult {
	return s.dispatchCall(ctx, task, call, false)
}

// dispatchCall is dispatch, or a step of a plan (inPlan): then the deadline notice is left to the plan's
// own result, and a tool artifact may not pull (manage.pull, as pull-artifact, is not callable from a
// plan step).
func (s *Session) dispatchCall(ctx context.Context, task string, call driver.ToolCall, inPlan bool) driver.ToolResult {
	start := time.Now()
	ctx, span := s.trc.StartTool(ctx, s.cfg.Member, call)
	var res runtimetools.Result
	ran := false
	why := "" // why the session refused the call itself, for its span
	// Precedence (SPEC "Reserved names"): the runtime-provided tools, then a shell binary, then a tool
	// artifact of the same name. A name the session does not have is refused as such before the
	// on-tool-call hooks are asked (SPEC "The grant is the tool's existence"); every other call passes
	// them first.
	tool, native := s.tools.Lookup(call.Name)
	a, isArtifact := s.art.Tool(call.Name)
	if !native && !isArtifact {
		if s.art.Removed(call.Name) {
			res, why = runtimetools.Refused(runtimetools.RemovedCall(call.Name)), spans.RefusedRemoved
		} else {
			res, why = runtimetools.Refused(runtimetools.Unstaged(call.Name, s.inventory())), spans.RefusedUnstaged
		}
	} else if refusal, ok := s.checkHooks(ctx, task, call); !ok {
		res, why = runtimetools.Refused(refusal), spans.RefusedDenied
	} else if native {
		events.ToolProgress(s.cfg.Events, task, call.Name, call.ID, "running")
		defer func() { events.ToolProgress(s.cfg.Events, task, call.Name, call.ID, res.Status) }()
		r, err := tool.Run(ctx, runtimetools.Call{ID: call.ID, Name: call.Name, Input: call.Input, Task: task})
		if err != nil {
			r = runtimetools.Result{Status: runtimetools.StatusError, Output: err.Error()}
		} else {
			ran = true
		}
		res = r
	} else {
		res = s.art.Run(ctx, task, a, call, inPlan)
		ran = res.Status != runtimetools.StatusRefused
	}
	s.cfg.Metrics.ToolCalls.WithLabelValues(call.Name, res.Status).Inc()
	s.cfg.Metrics.ToolDuration.WithLabelValues(call.Name).Observe(time.Since(start).Seconds())
	if res.Status != runtimetools.StatusRefused {
		// SPEC's summary ("Called worker: started") is the one line that says what a call did: it goes
		// in the call's tool_call record and the log, not to the model, which has the data and the note.
		fields := map[string]any{"call_id": call.ID, "tool": call.Name, "status": res.Status,
			"duration_ms": time.Since(start).Milliseconds()}
		if res.Summary != "" {
			fields["summary"] = res.Summary
		}
		// The input and the fenced result, so a reader of the records (the console's task page) sees what
		// the call asked and what it gave; each cut by records.Clip. The deadline notice has its own
		// record.
		fields["input"] = records.Clip(string(call.Input), records.ClipMax)
		fields["result"] = records.Clip(driver.Fence("tool:"+call.Name, res.Output, res.Note), records.ClipMax)
		spans.Fields(ctx, fields) // the record joins its tool call's span
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = s.records.Write(records.TypeToolCall, task, fields)
		s.log.Debug("tool call", "task", task, "tool", call.Name, "status", res.Status, "summary", res.Summary)
	}
	s.trc.EndCall(ctx, span, call.Name, res, why) // a command moved to the background gets its own span
	note := res.Note
	if !inPlan && ran && res.Status != runtimetools.StatusRefused {
		if line := s.rules.Notice(task); line != "" {
			note = strings.TrimPrefix(note+"\n"+line, "\n")
		}
	}
	return driver.ToolResult{
		CallID: call.ID,
		Tool:   call.Name,
		Status: res.Status,
		Output: res.Output,
		Data:   res.Data,
		Text:   driver.Fence("tool:"+call.Name, res.Output, note),
	}
}
