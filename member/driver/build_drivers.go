package driver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/murmur-run/murmur/member/capsule"
)

// OfflineTag is the build tag of a mur without the model providers' drivers (ModelDrivers is false):
// it serves the script driver alone, and its first build, on a cold build cache, takes a fraction of
// the time, since the official OpenAI and Anthropic SDKs are most of the compiling.
const OfflineTag = "offline"

// FullBuild is the command, run from the repository root, that installs a mur serving every driver.
const FullBuild = "go install ./cmd/mur"

// ErrLeftOut is the failure of a driver choice whose driver this build of mur leaves out.
var ErrLeftOut = errors.New("left out of this build of mur")

// Serves says whether this build of mur serves the driver called name: nil, or an error wrapping
// ErrLeftOut that says how to build a mur that does.
func Serves(name string) error {
	if name == capsule.DriverScript || ModelDrivers {
		return nil
	}
	return fmt.Errorf("driver %q is %w: it was built with -tags %s, which serves the script driver alone; install the mur that serves every driver, from the repository root: %s",
		name, ErrLeftOut, OfflineTag, FullBuild)
}

// Build makes a driver for every choice the capsule declares that this build serves (Serves). The
// choice a session starts on must be one of them.
func Build(c *capsule.Capsule, hc *http.Client, getenv func(string) string) (map[string]Driver, error) {
	out := map[string]Driver{}
	for _, name := range c.Inference.ChoiceOrder {
		ch := c.Inference.Choices[name]
		switch ch.Driver {
		case capsule.DriverScript:
			sc, err := choiceScript(c, ch)
			if err != nil {
				return nil, err
			}
			out[name] = NewScript(name, sc)
		case capsule.DriverOpenAI, capsule.DriverAnthropic:
			if Serves(ch.Driver) != nil {
				continue // the starting choice's check below, or CheckChoice at a switch, says why
			}
			d, err := newModelDriver(name, ch, hc, getenv)
			if err != nil {
				return nil, fmt.Errorf("%s: driver choice %s: %w", c.Path, name, err)
			}
			out[name] = d
		}
	}
	if _, ok := out[c.Inference.Driver]; !ok {
		ch := c.Inference.Choices[c.Inference.Driver]
		if err := Serves(ch.Driver); err != nil {
			return nil, fmt.Errorf("%s: inference.driver %s: %w", c.Path, c.Inference.Driver, err)
		}
		return nil, fmt.Errorf("%s: inference.driver %q uses driver %q, which this build of mur does not serve yet; use a choice with driver: script",
			c.Path, c.Inference.Driver, ch.Driver)
	}
	return out, nil
}

// choiceScript is the script a script driver choice plays: its script file, or the embedded default,
// parsed once a process for every member that plays it.
func choiceScript(c *capsule.Capsule, ch capsule.Choice) (*Script, error) {
	if ch.Script == "" {
		return sharedDefaultScript(), nil
	}
	return LoadScript(capsule.ResolvePath(c.Dir, ch.Script))
}

// CheckChoice checks that name can be the driver choice of the next inference call: it is declared,
// served by this build (served holds the drivers Build made), and its credential produces a value now.
func CheckChoice(inf *capsule.Inference, served map[string]Driver, name string, getenv func(string) string) error {
	ch, ok := inf.Choices[name]
	if !ok {
		return fmt.Errorf("no driver choice named %q is declared; the choices are %v", name, inf.ChoiceOrder)
	}
	if _, ok := served[name]; !ok {
		if err := Serves(ch.Driver); err != nil {
			return fmt.Errorf("driver choice %s: %w", name, err)
		}
		return fmt.Errorf("driver choice %s uses driver %q, which this build of mur does not serve", name, ch.Driver)
	}
	if ch.Credential != "" {
		if _, err := ResolveCredential(ch.Credential, getenv); err != nil {
			return fmt.Errorf("driver choice %s cannot be used now: %w", name, err)
		}
	}
	return nil
}

// skipper is the part of *testing.T that SkipUnlessModelDrivers uses.
type skipper interface {
	Helper()
	Skipf(format string, args ...any)
}

// SkipUnlessModelDrivers skips a test that needs the model providers' drivers when this build leaves
// them out (-tags offline), so the offline build's tests say what they did not run.
func SkipUnlessModelDrivers(t skipper) {
	t.Helper()
	if !ModelDrivers {
		t.Skipf("needs the openai and anthropic drivers, which a build with -tags %s leaves out", OfflineTag)
	}
}
