package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type fakeControl struct {
	current string
	refuse  map[string]error
}

func (f *fakeControl) Choices() []ChoiceInfo {
	return []ChoiceInfo{{Name: "local", Driver: "script"}, {Name: "gpt", Driver: "openai", Model: "gpt-4.1-mini"}}
}
func (f *fakeControl) Current() string { return f.current }
func (f *fakeControl) Switch(name string) error {
	if err := f.refuse[name]; err != nil {
		return err
	}
	f.current = name
	return nil
}

func TestSwitchDriver(t *testing.T) {
	ctl := &fakeControl{current: "local", refuse: map[string]error{
		"nope":   errors.New(`no driver choice named "nope" is declared; the choices are [local gpt]`),
		"claude": errors.New("driver choice claude cannot be used now: credential env:ANTHROPIC_API_KEY: the environment variable ANTHROPIC_API_KEY is not set; export it before starting mur"),
	}}
	rec := &memRecorder{}
	tool := &SwitchDriver{Control: ctl, Recorder: rec}

	m := tool.Manifest()
	var schema struct {
		Properties struct {
			Driver struct {
				Enum []string `json:"enum"`
			} `json:"driver"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(m.InputSchema, &schema)
	if strings.Join(schema.Properties.Driver.Enum, ",") != "local,gpt" || schema.Required[0] != "driver" {
		t.Errorf("schema %s", m.InputSchema)
	}
	for _, want := range []string{"local (driver script)", "gpt (driver openai, model gpt-4.1-mini)"} {
		if !strings.Contains(m.Description, want) {
			t.Errorf("description %q lacks %q", m.Description, want)
		}
	}

	res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(`{"driver":"gpt"}`), Task: "tsk_1"})
	if res.Status != StatusOK || ctl.current != "gpt" || !strings.Contains(res.Output, "from local to gpt") {
		t.Errorf("accepted switch: %+v, current %s", res, ctl.current)
	}
	if last := rec.recs[len(rec.recs)-1]; last["type"] != "control_change" || last["principal"] != "agent" || last["value"] != "gpt" || last["from"] != "local" {
		t.Errorf("record %v", last)
	}
	if _, has := rec.recs[len(rec.recs)-1]["token_id"]; has {
		t.Error("an agent's control_change carries a token_id")
	}
	for _, in := range []string{`{"driver":"nope"}`, `{"driver":"claude"}`, `{}`, `not json`} {
		before := ctl.current
		res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(in)})
		if res.Status != StatusRefused || ctl.current != before {
			t.Errorf("switch %s: %+v; current %s (was %s): nothing may switch", in, res, ctl.current, before)
		}
		if last := rec.recs[len(rec.recs)-1]; last["type"] != "control_refused" || last["principal"] != "agent" {
			t.Errorf("switch %s wrote %v, want control_refused", in, last)
		}
	}
	if res, _ := tool.Run(context.Background(), Call{Input: json.RawMessage(`{"driver":"claude"}`)}); !strings.Contains(res.Output, "ANTHROPIC_API_KEY is not set") {
		t.Errorf("the refusal does not give the reason: %s", res.Output)
	}
}
