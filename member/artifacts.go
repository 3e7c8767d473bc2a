package member

import (
	"context"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/hooks"
)

// trustNow is the trust class of the running agent task, for the hooks; "" outside one.
func (s *Session) trustNow() ids.Trust {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.tasks.Running(); r != nil && r.Attempt != nil {
		return r.Attempt.Trust()
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
