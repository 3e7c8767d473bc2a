package build

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
)

var (
	once sync.Once
	path string
	err  error
)

// FakeHarness builds the fake harness into dir once per process and returns its path.
func FakeHarness(dir string) (string, error) {
	once.Do(func() {
		out := filepath.Join(dir, "fakeharness")
		cmd := exec.Command("go", "build", "-o", out, "github.com/murmur-run/murmur/internal/fakeharness")
		if b, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("building the fake harness: %v\n%s", e, b)
			return
		}
		path = out
	})
	return path, err
}
