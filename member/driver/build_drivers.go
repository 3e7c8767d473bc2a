package driver

import (
	"fmt"
	"net/http"

	"github.com/murmur-run/murmur/member/capsule"
)

// buildDrivers makes a driver for every choice the capsule declares. The choice a session starts on
// must be one this build serves.
func Build(c *capsule.Capsule, hc *http.Client, getenv func(string) string) (map[string]Driver, error) {
	out := map[string]Driver{}
	for _, name := range c.Inference.ChoiceOrder {
		ch := c.Inference.Choices[name]
		switch ch.Driver {
		case "script":
			sc := DefaultScript()
			if ch.Script != "" {
				var err error
				if sc, err = LoadScript(capsule.ResolvePath(c.Dir, ch.Script)); err != nil {
					return nil, err
				}
			}
			out[name] = NewScript(name, sc)
		case "openai":
			d, err := NewOpenAI(name, ch, hc, getenv)
			if err != nil {
				return nil, fmt.Errorf("%s: driver choice %s: %w", c.Path, name, err)
			}
			out[name] = d
		case "anthropic":
			d, err := NewAnthropic(name, ch, hc, getenv)
			if err != nil {
				return nil, fmt.Errorf("%s: driver choice %s: %w", c.Path, name, err)
			}
			out[name] = d
		}
	}
	if _, ok := out[c.Inference.Driver]; !ok {
		ch := c.Inference.Choices[c.Inference.Driver]
		return nil, fmt.Errorf("%s: inference.driver %q uses driver %q, which this build of mur does not serve yet; use a choice with driver: script",
			c.Path, c.Inference.Driver, ch.Driver)
	}
	return out, nil
}

// CheckChoice checks that name can be the driver choice of the next inference call: it is declared,
// served by this build (served holds the drivers Build made), and its credential produces a value now.
func CheckChoice(inf *capsule.Inference, served map[string]Driver, name string, getenv func(string) string) error {
	ch, ok := inf.Choices[name]
	if !ok {
		return fmt.Errorf("no driver choice named %q is declared; the choices are %v", name, inf.ChoiceOrder)
	}
	if _, ok := served[name]; !ok {
		return fmt.Errorf("driver choice %s uses driver %q, which this build of mur does not serve", name, ch.Driver)
	}
	if ch.Credential != "" {
		if _, err := ResolveCredential(ch.Credential, getenv); err != nil {
			return fmt.Errorf("driver choice %s cannot be used now: %w", name, err)
		}
	}
	return nil
}
