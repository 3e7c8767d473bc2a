package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
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
		Confined: confined, Log: s.log, StartToolServer: s.cfg.StartToolServer, Tools: s.tools.Manifests,
		Dispatch: func(ctx context.Context, task, id, name string, input json.RawMessage) (string, bool) {
			r := s.dispatch(ctx, task, driver.ToolCall{ID: id, Name: name, Input: input})
			return r.Text, r.Status != runtimetools.StatusOK
		},
		Record: s.records.Write, Turn: s.meter.HarnessTurn})
	return err
}

// runProcess runs one task under transport: process: the harness with the task text as its prompt;
// when it ends its run with member calls out, the task waits for their answers (SPEC "How the answer
// arrives") and resumes the harness's same session with the continuation message as the prompt. A
// harness that called end-without-answer and kept going ends the task the same way once it finishes.
func (s *Session) runProcess(ctx context.Context, t *a2a.Task, text string) (string, error) {
	if ids.Get(murmurMeta(t), ids.MetaTrust) == TrustUntrusted {
		text = driver.Fence("task", text, "")
	}
	task := string(t.ID)
	defer s.proc.Begin(ctx, task)() // the tool server answers for the task until its calls have ended
	tc, dt, endCalls := s.beginCalls(ctx, t)
	defer endCalls()
	prompt, session := text, ""
	for {
		res, stopped, err := s.proc.Run(ctx, task, prompt, session)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if reason, ok := tc.NoAnswer(); ok {
			return "", &errNoAnswer{reason: reason, below: calls.NoAnswerBelow(tc.Latest())}
		}
		if stopped != nil {
			return "", stopped
		}
		if err != nil {
			return "", err
		}
		if calls.Outstanding(tc, dt) && s.meter.TurnsLeft() {
			if res.Session == "" {
				return "", fmt.Errorf("the harness reported no session id, so it cannot be resumed with the answers of the members it called (dialect %s)", s.cfg.Capsule.Harness.Dialect)
			}
			if len(s.cfg.Capsule.Harness.Resume) == 0 {
				return "", fmt.Errorf("the harness called members, but %s sets no harness.resume, so it cannot be resumed with their answers; add resume: [--resume, \"{session}\"] or what the harness takes", s.cfg.Capsule.Path)
			}
			if prompt, _, err = calls.Resume(ctx, tc, dt, func(text string) { s.workingStatus(t, text) }); err != nil {
				return "", err
			}
			session = res.Session
			continue
		}
		if strings.TrimSpace(res.Answer) == "" {
			return "", errors.New("the harness ended its run with an empty answer")
		}
		if below := calls.NoAnswerBelow(tc.Latest()); len(below) > 0 {
			ids.Set(murmurMeta(t), ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(below))
		}
		return res.Answer, nil
	}
}
