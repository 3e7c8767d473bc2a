package member

import "github.com/murmur-run/murmur/runtimetools"

// StatusSnapshot reports the session's numbers at this moment (runtimetools.StatusSource). The deadline
// is set once, in Start.
func (s *Session) StatusSnapshot() runtimetools.StatusSnapshot {
	return s.meter.Snapshot(s.deadline, s.proc.Quota())
}

// Current returns the choice the next inference call uses (control.Choice).
func (s *Session) Current() string { return s.choice.Current() }
