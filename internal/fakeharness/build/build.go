package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

var (
	mu   sync.Mutex
	path string // the last build, while it is still there
)

// FakeHarness builds the fake harness into dir and returns its path. A build is reused for as long as
// its file is there: dir is usually a test's temporary directory, which goes with the test (and so
// with a later run of it under -count).
func FakeHarness(dir string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	out := filepath.Join(dir, "fakeharness")
	cmd := exec.Command("go", "build", "-o", out, "github.com/murmur-run/murmur/internal/fakeharness")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake harness: %v\n%s", err, b)
	}
	path = out
	return path, nil
}
