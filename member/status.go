package member

import (
	"errors"
	"time"

	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// taskProgress is what the running task has used of its limits; session-status reads it.
type taskProgress struct {
	start       time.Time
	turns       int
	keepWorking int
	doneCheck   int
	reopens     int
}

// StatusSnapshot reports the session's numbers at this moment (runtimetools.StatusSource).
func (s *Session) StatusSnapshot() runtimetools.StatusSnapshot {
	c := s.cfg.Capsule
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := runtimetools.StatusSnapshot{
		Now:          s.cfg.Now(),
		SessionStart: s.started,
		Deadline:     s.deadline,
		Tokens:       s.tokens,
		SpendTokens:  s.spend,
	}
	if inf := c.Inference; inf != nil {
		snap.TurnsCap = inf.MaxTurns
		snap.SpendCeiling = inf.MaxSessionTokens
	}
	var p taskProgress
	if s.progress != nil {
		p = *s.progress
		snap.TaskStart = p.start
		snap.TurnsUsed = p.turns
	}
	if kw := c.Lifecycle.KeepWorking; kw != nil {
		snap.KeepWorking = &runtimetools.Counter{Used: p.keepWorking, Limit: kw.Limit}
	}
	if dc := c.Lifecycle.DoneCheck; dc != nil {
		snap.DoneCheck = &runtimetools.Counter{Used: p.doneCheck, Limit: dc.Limit}
	}
	if s.context != nil {
		cs := *s.context
		snap.Context = &cs
	}
	snap.Quota = s.proc.Quota()
	return snap
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
