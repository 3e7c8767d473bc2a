package member

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/runtimetools"
)

// startProcess starts the process transport (package harness): the tool server, the MCP config, the
// harness runner. It runs in Start, after the tools are staged; confined says whether commands run
// under their Landlock rules.
func (s *Session) startProcess(confined bool) (err error) {
	dir := ""
	if s.cfg.RuntimeRoot != "" {
		dir = filepath.Join(s.cfg.RuntimeRoot, s.id)
	}
	s.proc, err = harness.NewTransport(harness.TransportConfig{Capsule: s.cfg.Capsule, Member: s.cfg.Member,
		Formation: s.cfg.Formation, Session: s.id, RuntimeDir: dir, Getenv: s.cfg.Getenv, Start: s.runner.Start,
		Confined: confined, Secrets: s.runner.Secrets(), Log: s.log, StartToolServer: s.cfg.StartToolServer, Tools: s.processTools, SystemPrompt: s.systemPrompt,
		Dispatch: func(ctx context.Context, task, id, name string, input json.RawMessage) (string, bool) {
			ctx = s.trc.InTask(ctx, task) // its span is the task's child
			r := s.dispatch(ctx, task, driver.ToolCall{ID: id, Name: name, Input: input})
			return r.Text, r.Status != runtimetools.StatusOK
		},
		Record: s.records.Write, Turn: s.meter.HarnessTurn})
	return err
}

// runProcess runs one task under transport: process (harness.Transport.RunTask), with the task's
// member calls and delegations.
func (s *Session) runProcess(ctx context.Context, t *a2a.Task, text string) (string, error) {
	task := string(t.ID)
	defer s.proc.Begin(ctx, task)() // the tool server answers for the task until its calls have ended
	defer s.noteTurns(ctx)
	tc, dt, endCalls := s.beginCalls(ctx, t)
	defer endCalls()
	answer, err := s.proc.RunTask(ctx, harness.Task{ID: task, Prompt: fenceUntrusted(t, "task", text),
		NoAnswer:    func() error { return noAnswer(tc) },
		Outstanding: func() bool { return calls.Outstanding(tc, dt) },
		TurnsLeft:   s.meter.TurnsLeft,
		Resume: func(ctx context.Context) (string, error) {
			prompt, _, err := s.resume(ctx, t, tc, dt)
			return prompt, err
		},
		// The same hooks, reopen count and records as the http loop's (runAgent).
		End: func(ctx context.Context, answer string) (string, bool) {
			return s.taskEndHooks(ctx, task, "completed", answer)
		},
		EndNoAnswer: func(ctx context.Context) (string, bool) { return s.noAnswerHooks(ctx, task, tc) }})
	if err == nil {
		markNoAnswerBelow(t, tc)
	}
	return answer, err
}

// processTools is the session's tools as the tool server lists them to the harness: the tool array the
// http loop offers its model (toolSpecsNow), the tool artifacts with their own description and schema.
// A tool artifact that declares no input_schema takes any object, as the MCP tool list needs a schema.
func (s *Session) processTools() []runtimetools.Manifest {
	specs := s.toolSpecsNow()
	out := make([]runtimetools.Manifest, 0, len(specs))
	for _, t := range specs {
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, runtimetools.Manifest{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}
