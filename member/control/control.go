package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/records"
)

// ErrRefused is the failure of Apply for a change the member does not make: a setting not listed in
// control.agent_settings, or a value the setting's checks refuse. Its message says why.
var ErrRefused = errors.New("control change refused")

// Change is what Apply did.
type Change struct {
	Setting  string `json:"setting"`
	Previous string `json:"previous"`
	Value    string `json:"value"`
}

// Driver holds the inference_driver setting: the choice the next inference call uses, and the checked
// switch to another.
type Driver interface {
	Current() string
	Switch(name string) error
}

// Config is the member a change is applied to.
type Config struct {
	Listed []string // the capsule's control.agent_settings
	Agent  bool     // the capsule is an agent, which has an inference_driver
	Driver Driver
	// Record writes one record of the session (control_change, control_refused).
	Record records.WriteFunc
}

// Apply changes a setting for the next inference call on the operator's behalf, with the checks and
// messages switch-driver has. tokenID names the control token the request came with. It writes
// control_change, or control_refused with the reason.
func Apply(cfg Config, setting, value, tokenID string) (Change, error) {
	refuse := func(reason string) (Change, error) {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = cfg.Record(records.TypeControlRefused, "", map[string]any{"principal": "operator", "token_id": tokenID,
			"setting": setting, "value": value, "reason": reason})
		return Change{}, fmt.Errorf("%w: %s", ErrRefused, reason)
	}
	listed := cfg.Listed
	switch {
	case !slices.Contains(listed, setting) && len(listed) == 0:
		return refuse(fmt.Sprintf("setting %q may not be changed: this capsule's murmur.yaml lists no control.agent_settings", setting))
	case !slices.Contains(listed, setting):
		return refuse(fmt.Sprintf("setting %q may not be changed: control.agent_settings lists %s", setting, strings.Join(listed, ", ")))
	case setting != string(ids.SettingInferenceDriver) || !cfg.Agent:
		return refuse(fmt.Sprintf("setting %q is not one this member can change", setting))
	}
	prev := cfg.Driver.Current()
	if err := cfg.Driver.Switch(value); err != nil {
		return refuse(err.Error() + "; the driver choice is still " + prev)
	}
	c := Change{Setting: setting, Previous: prev, Value: value}
	if err := cfg.Record(records.TypeControlChange, "", map[string]any{"principal": "operator", "token_id": tokenID,
		"setting": setting, "from": prev, "value": value}); err != nil {
		return c, err
	}
	return c, nil
}
