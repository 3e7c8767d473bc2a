package member

import (
	"context"

	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/hooks"
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
