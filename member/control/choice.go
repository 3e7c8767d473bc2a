package control

import (
	"sync"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// Choice is a session's inference_driver setting: the driver choice the next inference call uses, and
// the checked switch to another (the Driver Apply changes, and switch-driver's
// runtimetools.DriverControl). It is safe for concurrent use.
type Choice struct {
	inf   *capsule.Inference
	check func(name string) error

	mu        sync.Mutex
	current   string
	unapplied string // a choice switched to that no inference call has used yet
}

// NewChoice returns the setting of a session whose next inference call uses current ("" for a
// session that makes none); check refuses a choice that cannot be switched to (driver.CheckChoice).
func NewChoice(current string, inf *capsule.Inference, check func(name string) error) *Choice {
	return &Choice{inf: inf, check: check, current: current}
}

// ChoiceFor returns the setting of a session running c, whose drivers (driver.Build) serve its choices:
// its first inference call uses inference.driver for an agent under transport: http, which alone makes
// inference calls, and a switch is checked by driver.CheckChoice.
func ChoiceFor(c *capsule.Capsule, drivers map[string]driver.Driver, getenv func(string) string) *Choice {
	current := ""
	if c.IsAgent() && c.Harness == nil {
		current = c.Inference.Driver
	}
	return NewChoice(current, c.Inference, func(name string) error {
		return driver.CheckChoice(c.Inference, drivers, name, getenv)
	})
}

// Choices lists the declared driver choices in declaration order.
func (c *Choice) Choices() []runtimetools.ChoiceInfo {
	var out []runtimetools.ChoiceInfo
	for _, name := range c.inf.ChoiceOrder {
		ch := c.inf.Choices[name]
		out = append(out, runtimetools.ChoiceInfo{Name: name, Driver: ch.Driver, Model: ch.Model})
	}
	return out
}

// Current returns the choice the next inference call uses.
func (c *Choice) Current() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// Switch makes name the driver choice of the next inference call, after the same checks a controller's
// change gets: the choice must be declared, served by this build, and its credential must produce a
// value now.
func (c *Choice) Switch(name string) error {
	if err := c.check(name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != name {
		c.current = name
		c.unapplied = name
	}
	return nil
}

// Next returns the choice an inference call is about to use, and whether that call is the first to
// use a switch to it (its control_applied record is then due).
func (c *Choice) Next() (choice string, applied bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	applied = c.unapplied == c.current
	if applied {
		c.unapplied = ""
	}
	return c.current, applied
}
