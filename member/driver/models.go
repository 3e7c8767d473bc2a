//go:build !offline

package driver

import (
	"net/http"

	"github.com/murmur-run/murmur/member/capsule"
)

// ModelDrivers says whether this build of mur serves the model providers' drivers, openai and
// anthropic. Every build does but one made with -tags offline (OfflineTag).
const ModelDrivers = true

// newModelDriver makes the driver of a choice whose driver is a model provider's.
func newModelDriver(name string, ch capsule.Choice, hc *http.Client, getenv func(string) string) (Driver, error) {
	if ch.Driver == capsule.DriverAnthropic {
		d, err := NewAnthropic(name, ch, hc, getenv)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	d, err := NewOpenAI(name, ch, hc, getenv)
	if err != nil {
		return nil, err
	}
	return d, nil
}
