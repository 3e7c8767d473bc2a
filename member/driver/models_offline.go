//go:build offline

package driver

import (
	"net/http"

	"github.com/murmur-run/murmur/member/capsule"
)

// ModelDrivers is false in a build made with -tags offline: the openai and anthropic drivers, and the
// official SDKs they are written on, are left out, which takes most of the time out of a first build.
const ModelDrivers = false

// newModelDriver refuses every model provider's driver: Build does not call it, since Serves refuses
// first.
func newModelDriver(_ string, ch capsule.Choice, _ *http.Client, _ func(string) string) (Driver, error) {
	return nil, Serves(ch.Driver)
}
