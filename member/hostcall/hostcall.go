// Package hostcall answers what a WIT level 2 artifact asks of its session (DESIGN §18, the wire contract
// in member/artifact/wit): a tool artifact's manage.pull, which is the session's pull-artifact pull, and a
// hook's run_inference, one inference call on the session's current driver choice, counted as every
// inference call is. The session hands a Config of its parts when an artifact asks; package staged runs
// the artifacts and carries the answers to them. A run_inference call is a chat span, the child of the
// hook's module run.
//
// Imports: member/artifact/wit, member/capsule, member/control, member/driver, member/meter,
// member/records (the record types), member/spans, runtimetools; never member.
package hostcall

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/control"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/meter"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/spans"
	"github.com/murmur-run/murmur/runtimetools"
)

// New is the Config of a session's parts; tools is its registry, whose pull-artifact (when staged)
// answers manage.pull.
func New(c *capsule.Capsule, drivers map[string]driver.Driver, choice *control.Choice, m *meter.Meter,
	record records.WriteFunc, tools *runtimetools.Registry) Config {
	cfg := Config{Capsule: c, Drivers: drivers, Choice: choice, Meter: m, Record: record}
	if t, ok := tools.Lookup("pull-artifact"); ok {
		cfg.Puller, _ = t.(*runtimetools.PullArtifact)
	}
	return cfg
}

// Config is the session's parts a host call uses.
type Config struct {
	Capsule *capsule.Capsule
	Drivers map[string]driver.Driver // none under transport: process
	Choice  *control.Choice          // the driver choice of the next inference call
	Meter   *meter.Meter             // the task's turns and the session's spend
	// Record writes one record of the session.
	Record records.WriteFunc
	// Puller is the session's pull-artifact tool; nil without capabilities.install.
	Puller *runtimetools.PullArtifact
}

// Tool is what a WIT level 2 tool artifact may ask during a call for task (DESIGN §18): manage.pull,
// which is pull-artifact's pull, so a capsule without capabilities.install (and with it, no
// pull-artifact) is refused not-granted:, and so is a call made while the tool runs as a step of a plan
// (inPlan), since SPEC makes pull-artifact not callable from a plan step.
func (c *Config) Tool(task string, inPlan bool) wit.Functions {
	return wit.Functions{Pull: func(ctx context.Context, req wit.PullRequest) (json.RawMessage, error) {
		switch {
		case inPlan:
			return nil, wit.Refuse(wit.TokenNotGranted, fmt.Sprintf("manage.pull is not callable from a plan step, as pull-artifact is not; "+
				"call this tool on its own, outside a plan, for it to pull %s", req.Artifact))
		case c.Puller == nil:
			return nil, wit.Refuse(wit.TokenNotGranted, "this capsule declares no capabilities.install, so manage.pull installs nothing; "+
				"declare capabilities.install with the tools the session may pull, such as install: {tool: [\"local/*\"]}")
		}
		res, err := c.Puller.Manage(ctx, task, req.Artifact)
		switch {
		case err != nil:
			return nil, err
		case res.Status != runtimetools.StatusOK:
			return nil, &wit.Refusal{Text: res.Output}
		}
		return json.Marshal(res.Data)
	}}
}

// Hook is what a WIT level 2 hook may ask while it runs for task (DESIGN §18): run_inference, when
// capabilities.hooks.inference grants it.
func (c *Config) Hook(task, hook string) wit.Functions {
	return wit.Functions{Infer: func(ctx context.Context, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
		return c.infer(ctx, task, hook, req)
	}}
}

// infer is one run_inference call of hook for task: one inference call on the session's current
// driver choice, without tools. It counts in the task's turns and the session's spend as every inference
// call does (SPEC: turns.used includes a hook's run-inference), so it is refused once inference.max_turns
// or inference.max_session_tokens is reached, with the texts that end an agent's task there.
func (c *Config) infer(ctx context.Context, task, hook string, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
	switch {
	case !c.Capsule.Capabilities.Hooks.Inference:
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenNotGranted, fmt.Sprintf(
			"the capsule %s does not grant its hooks inference; set capabilities.hooks.inference: true in its murmur.yaml for %s to make run_inference calls", c.Capsule.Name, hook))
	case len(c.Drivers) == 0:
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenNotGranted,
			"this session has no inference driver of its own (under transport: process the harness makes its inference calls), so run_inference has none to call")
	}
	if why := c.Meter.Limit(); why != "" {
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenOverLimit, why+"; run_inference made no call")
	}
	choice, applied := c.Choice.Next()
	if applied {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = c.Record(records.TypeControlApplied, task, map[string]any{"setting": string(ids.SettingInferenceDriver), "value": choice})
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
	ictx, span := spans.StartHookChat(ctx, hook, choice, c.Capsule.Inference.Choices[choice])
	resp, err := c.Drivers[choice].Infer(ictx, ireq)
	spans.EndChat(span, resp.Usage, err)
	if err != nil {
		if ctx.Err() != nil {
			return wit.InferenceAnswer{}, wit.Refuse(wit.TokenFailed, fmt.Sprintf("the hook's run ended before the model answered: %v", context.Cause(ctx)))
		}
		return wit.InferenceAnswer{}, wit.Refuse(wit.TokenFailed, fmt.Sprintf("inference (driver choice %s): %v", choice, err))
	}
	in, out := c.Meter.AccountHook(task, choice, hook, ireq, resp)
	return wit.InferenceAnswer{Text: resp.Text, Usage: wit.Usage{Input: in, Output: out}}, nil
}
