package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/records"
)

// ChoiceInfo describes one declared driver choice.
type ChoiceInfo struct {
	Name   string
	Driver string
	Model  string
}

// DriverControl is what switch-driver needs of the session.
type DriverControl interface {
	// Choices returns every declared choice, in declaration order.
	Choices() []ChoiceInfo
	// Current returns the choice the next inference call uses.
	Current() string
	// Switch makes name the choice of the next inference call and every one after, or returns the
	// reason it cannot (an undeclared name, a credential that produces no value now); on an error
	// nothing switches.
	Switch(name string) error
}

// SwitchDriver is the switch-driver tool, staged when control.agent_settings lists inference.driver.
type SwitchDriver struct {
	Control  DriverControl
	Recorder Recorder
}

func describe(c ChoiceInfo) string {
	if c.Model == "" {
		return fmt.Sprintf("%s (driver %s)", c.Name, c.Driver)
	}
	return fmt.Sprintf("%s (driver %s, model %s)", c.Name, c.Driver, c.Model)
}

// Manifest lists every choice in the schema's enum and, with its model and driver, in the description.
func (t *SwitchDriver) Manifest() Manifest {
	choices := t.Control.Choices()
	names := make([]string, len(choices))
	descs := make([]string, len(choices))
	for i, c := range choices {
		names[i] = c.Name
		descs[i] = describe(c)
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"driver": map[string]any{"type": "string", "enum": names, "description": "the driver choice to use from the next inference call on"},
		},
		"required": []string{"driver"},
	})
	return NativeManifest("switch-driver",
		"Selects the driver choice the agent's next inference call, and every one after it, is served by. The choices: "+
			strings.Join(descs, "; ")+".", schema)
}

// Run switches the driver choice, or refuses with the reason and switches nothing.
func (t *SwitchDriver) Run(_ context.Context, call Call) (Result, error) {
	var in struct {
		Driver *string `json:"driver"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Driver == nil {
		msg := `switch-driver needs {"driver": "<choice name>"}`
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = t.Recorder.Write(records.TypeControlRefused, call.Task, map[string]any{"principal": "agent", "setting": string(ids.SettingInferenceDriver), "reason": msg})
		return Refused(msg), nil
	}
	prev := t.Control.Current()
	if err := t.Control.Switch(*in.Driver); err != nil {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = t.Recorder.Write(records.TypeControlRefused, call.Task, map[string]any{
			"principal": "agent", "setting": string(ids.SettingInferenceDriver), "value": *in.Driver, "reason": err.Error()})
		return Refused("switch-driver refused: " + err.Error() + "; the driver choice is still " + prev + "."), nil
	}
	if err := t.Recorder.Write(records.TypeControlChange, call.Task, map[string]any{
		"principal": "agent", "setting": string(ids.SettingInferenceDriver), "from": prev, "value": *in.Driver}); err != nil {
		return Result{}, err
	}
	return Result{Status: StatusOK, Output: fmt.Sprintf(
		"switched the driver choice from %s to %s: the next inference call, and every one after it, is served by %s.",
		prev, *in.Driver, *in.Driver), Data: map[string]any{"previous": prev, "driver": *in.Driver}}, nil
}
