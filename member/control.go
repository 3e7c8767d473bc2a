package member

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
)

// ErrControlRefused is the failure of Control for a change the member does not make: a setting not
// listed in control.agent_settings, or a value the setting's checks refuse. Its message says why.
var ErrControlRefused = errors.New("control change refused")

// ControlChange is what Control did.
type ControlChange struct {
	Setting  string `json:"setting"`
	Previous string `json:"previous"`
	Value    string `json:"value"`
}

// Control changes a setting for the next inference call on the operator's behalf, through the control
// surface (DESIGN §14), with the checks and messages switch-driver has. tokenID names the control token
// the request came with. It writes control_change, or control_refused with the reason; the agent loop
// writes control_applied at the first inference call that uses the change.
func (s *Session) Control(setting, value, tokenID string) (ControlChange, error) {
	refuse := func(reason string) (ControlChange, error) {
		s.records.Write("control_refused", "", map[string]any{"principal": "operator", "token_id": tokenID,
			"setting": setting, "value": value, "reason": reason})
		return ControlChange{}, fmt.Errorf("%w: %s", ErrControlRefused, reason)
	}
	listed := s.cfg.Capsule.Control.AgentSettings
	switch {
	case !slices.Contains(listed, setting) && len(listed) == 0:
		return refuse(fmt.Sprintf("setting %q may not be changed: this capsule's murmur.yaml lists no control.agent_settings", setting))
	case !slices.Contains(listed, setting):
		return refuse(fmt.Sprintf("setting %q may not be changed: control.agent_settings lists %s", setting, strings.Join(listed, ", ")))
	case setting != string(ids.SettingInferenceDriver) || !s.cfg.Capsule.IsAgent():
		return refuse(fmt.Sprintf("setting %q is not one this member can change", setting))
	}
	prev := s.Current()
	if err := s.Switch(value); err != nil {
		return refuse(err.Error() + "; the driver choice is still " + prev)
	}
	c := ControlChange{Setting: setting, Previous: prev, Value: value}
	if err := s.records.Write("control_change", "", map[string]any{"principal": "operator", "token_id": tokenID,
		"setting": setting, "from": prev, "value": value}); err != nil {
		return c, err
	}
	return c, nil
}
