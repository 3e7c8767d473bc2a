package member

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/murmur-run/murmur/a2a"
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
		Confined: confined, Secrets: s.runner.Secrets(), Log: s.log, StartToolServer: s.cfg.StartToolServer, Tools: s.toolSpecsNow, SystemPrompt: s.systemPrompt,
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
	a, endAttempt := s.begin(ctx, t)
	defer endAttempt()
	answer, err := s.proc.RunTask(ctx, harness.Task{ID: task, Prompt: fenceUntrusted(t, "task", text),
		NoAnswer: a.NoAnswer, Outstanding: a.Outstanding, TurnsLeft: s.meter.TurnsLeft,
		Resume: func(ctx context.Context) (string, error) {
			prompt, _, err := a.Resume(ctx, func(text string) { s.workingStatus(t, text) })
			return prompt, err
		},
		// The same hooks, reopen count and records as the http loop's (runAgent).
		End: a.Completed, EndNoAnswer: a.Reopen})
	if err == nil {
		a.MarkNoAnswerBelow(t)
	}
	return answer, err
}
