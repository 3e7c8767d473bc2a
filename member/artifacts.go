package member

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/hooks"
	"github.com/murmur-run/murmur/runtimetools"
)

// trustNow is the trust class of the running agent task, for the hooks; "" outside one.
func (s *Session) trustNow() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls != nil {
		return s.calls.Trust()
	}
	return ""
}

// checkHooks asks the on-tool-call hooks about a call; a refusal text when one denies, or when a hook
// asked the task's sender and the sender denied (DESIGN §15).
func (s *Session) checkHooks(ctx context.Context, task string, call driver.ToolCall) (string, bool) {
	d := s.art.CheckToolCall(ctx, hooks.ToolCall{Tool: call.Name, Input: call.Input, Task: task, Trust: s.trustNow()})
	switch {
	case d.Allow:
		return "", true
	case d.Ask:
		q := converse.Question{Text: d.Question, Tool: call.Name, Input: call.Input, Hook: d.Hook}
		reply, err := s.askSender(ctx, task, q)
		return converse.Approval(reply, err, q, d.Reason)
	}
	return d.Refusal(), false
}

// toolSpecsNow is the tool array as sent: the runtime-provided tools and shell binaries, and the tool
// artifacts (package staged says which describes a name both hold).
func (s *Session) toolSpecsNow() []driver.ToolSpec { return s.art.ToolSpecs(s.tools.Manifests()) }

// inventory names every tool the model may call.
func (s *Session) inventory() []string { return s.art.Inventory(s.tools.Manifests()) }

// taskEndHooks asks the on-task-end hooks whether a task that answered should be reopened; the message
// to continue with when one asks, the reopen counted.
func (s *Session) taskEndHooks(ctx context.Context, task, status, answer string) (string, bool) {
	return s.askTaskEnd(ctx, hooks.TaskEnd{Task: task, Status: status, Answer: answer})
}

// noAnswerHooks asks the on-task-end hooks about an attempt of task that ended without an answer (its
// model called end-without-answer, which tc accepted): the hooks are told exit status no_answer and the
// reason. When one reopens the task, tc withdraws the end-without-answer, so the reopened attempt may
// answer or end without an answer again, and the message to continue with is returned, the reopen
// counted. Every transport calls it where an attempt ends no_answer, before the task ends.
func (s *Session) noAnswerHooks(ctx context.Context, task string, tc *calls.Tracker) (string, bool) {
	reason, ended := tc.NoAnswer()
	if !ended {
		return "", false
	}
	msg, ok := s.askTaskEnd(ctx, hooks.TaskEnd{Task: task, Status: "no_answer", Reason: reason})
	if ok {
		tc.ReopenNoAnswer()
	}
	return msg, ok
}

// askTaskEnd asks the on-task-end hooks about end, filled in with the task's trust and reopens so far;
// the reopen counted when one asks (package staged writes task_reopened, or hook_reopen_refused past
// lifecycle.max_task_reopens).
func (s *Session) askTaskEnd(ctx context.Context, end hooks.TaskEnd) (string, bool) {
	end.Trust, end.Reopens = s.trustNow(), s.meter.Reopens()
	msg, ok := s.art.CheckTaskEnd(ctx, end)
	if ok {
		s.meter.Reopened()
	}
	return msg, ok
}

// toolHost is what a WIT level 2 tool artifact may ask of the session during a call for task (DESIGN
// §18): manage.pull, which is pull-artifact's pull, so a capsule without capabilities.install (and with
// it, no pull-artifact) is refused not-granted:.
func (s *Session) toolHost(task string) wit.Functions {
	return wit.Functions{Pull: func(ctx context.Context, req wit.PullRequest) (json.RawMessage, error) {
		t, _ := s.tools.Lookup("pull-artifact")
		pa, ok := t.(*runtimetools.PullArtifact)
		if !ok {
			return nil, wit.Refuse(wit.TokenNotGranted, "this capsule declares no capabilities.install, so manage.pull installs nothing; "+
				"declare capabilities.install with the tools the session may pull, such as install: {tool: [\"local/*\"]}")
		}
		res, err := pa.Manage(ctx, task, req.Artifact)
		switch {
		case err != nil:
			return nil, err
		case res.Status != runtimetools.StatusOK:
			return nil, &wit.Refusal{Text: res.Output}
		}
		return json.Marshal(res.Data)
	}}
}

// hookHost is what a WIT level 2 hook may ask of the session while it runs for task (DESIGN §18):
// run_inference, when capabilities.hooks.inference grants it.
func (s *Session) hookHost(task, hook string) wit.Functions {
	return wit.Functions{Infer: func(ctx context.Context, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
		return s.hookInference(ctx, task, hook, req)
	}}
}

// hookInference is one run_inference call of hook for task: one inference call on the session's current
// driver choice, without tools. It counts in the task's turns and the session's spend as every inference
// call does (SPEC: turns.used includes a hook's run-inference), so it is refused once inference.max_turns
// or inference.max_session_tokens is reached, with the texts that end an agent's task there.
func (s *Session) hookInference(ctx context.Context, task, hook string, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
	c := s.cfg.Capsule
	switch {
	case !c.Capabilities.Hooks.Inference:
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenNotGranted, fmt.Sprintf(
			"the capsule %s does not grant its hooks inference; set capabilities.hooks.inference: true in its murmur.yaml for %s to make run_inference calls", c.Name, hook))
	case len(s.drivers) == 0:
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenNotGranted,
			"this session has no inference driver of its own (under transport: process the harness makes its inference calls), so run_inference has none to call")
	}
	if why := s.meter.Limit(); why != "" {
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenOverLimit, why+"; run_inference made no call")
	}
	choice, applied := s.choice.Next()
	if applied {
		s.records.Write("control_applied", task, map[string]any{"setting": string(ids.SettingInferenceDriver), "value": choice})
	}
	ireq := driver.InferRequest{Turn: 1, MaxOutputTokens: req.MaxOutputTokens}
	var system []string
	for _, m := range req.Messages {
		switch m.Role {
		case wit.RoleSystem:
			system = append(system, m.Text)
		case wit.RoleUser:
			if ireq.Task == "" {
				ireq.Task = m.Text // what the script driver's rules match: the hook's question
			}
			ireq.Messages = append(ireq.Messages, driver.ChatMessage{Role: driver.RoleUser, Text: m.Text})
		case wit.RoleAssistant:
			ireq.Messages = append(ireq.Messages, driver.ChatMessage{Role: driver.RoleAssistant, Text: m.Text})
		}
	}
	ireq.System = strings.Join(system, "\n\n")
	resp, err := s.drivers[choice].Infer(ctx, ireq)
	if err != nil {
		if ctx.Err() != nil {
			return wit.InferenceAnswer{}, wit.Refuse(wit.TokenFailed, fmt.Sprintf("the hook's run ended before the model answered: %v", context.Cause(ctx)))
		}
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenFailed, fmt.Sprintf("inference (driver choice %s): %v", choice, err))
	}
	in, out := s.meter.AccountHook(task, choice, hook, ireq, resp)
	return wit.InferenceAnswer{Text: resp.Text, Usage: wit.Usage{Input: in, Output: out}}, nil
}
