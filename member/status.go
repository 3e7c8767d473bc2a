package member

import (
	"errors"

	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// StatusSnapshot reports the session's numbers at this moment (runtimetools.StatusSource). The deadline
// is set once, in Start.
func (s *Session) StatusSnapshot() runtimetools.StatusSnapshot {
	return s.meter.Snapshot(s.deadline, s.proc.Quota())
}

// Choices lists the declared driver choices in declaration order (runtimetools.DriverControl).
func (s *Session) Choices() []runtimetools.ChoiceInfo {
	inf := s.cfg.Capsule.Inference
	var out []runtimetools.ChoiceInfo
	for _, name := range inf.ChoiceOrder {
		ch := inf.Choices[name]
		out = append(out, runtimetools.ChoiceInfo{Name: name, Driver: ch.Driver, Model: ch.Model})
	}
	return out
}

// Current returns the choice the next inference call uses.
func (s *Session) Current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.choice
}

// Switch makes name the driver choice of the next inference call, after the same checks a controller's
// change gets: the choice must be declared, served by this build, and its credential must produce a
// value now.
func (s *Session) Switch(name string) error {
	if err := driver.CheckChoice(s.cfg.Capsule.Inference, s.drivers, name, s.cfg.Getenv); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.choice != name {
		s.choice = name
		s.unapplied = name
	}
	return nil
}

// errSessionDeadline is the cause a task's context ends with when the session reaches its deadline.
var errSessionDeadline = errors.New("session deadline reached")
