package member

import "github.com/murmur-run/murmur/member/control"

// ErrControlRefused is the failure of Control for a change the member does not make (control.ErrRefused).
var ErrControlRefused = control.ErrRefused

// ControlChange is what Control did.
type ControlChange = control.Change

// Control changes a setting for the next inference call on the operator's behalf, through the control
// surface (DESIGN §14; package control). tokenID names the control token the request came with.
func (s *Session) Control(setting, value, tokenID string) (ControlChange, error) {
	c := s.cfg.Capsule
	return control.Apply(control.Config{Listed: c.Control.AgentSettings, Agent: c.IsAgent(), Driver: s.choice, Record: s.records.Write},
		setting, value, tokenID)
}
