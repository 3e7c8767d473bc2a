//go:build !wasip1

package guest

import (
	"fmt"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// roundTrip exists only in a wasip1 module, where the host module "murmur" is.
func roundTrip(fn string, _ []byte) ([]byte, error) {
	return nil, fmt.Errorf("%s.%s exists only in a WebAssembly module built with GOOS=wasip1 GOARCH=wasm and run by murmur", wit.Module, fn)
}
