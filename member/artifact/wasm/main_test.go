package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// modules builds the test modules of testdata/ once per test binary, when a test first asks: a wasip1
// build takes seconds.
var modules struct {
	dir   string // the test binary's scratch directory
	once  sync.Once
	tool  string // testdata/tool built
	err   error
	cache string // a compilation cache shared by the tests that do not test the cache
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modules.dir = dir
	modules.cache = filepath.Join(dir, "cache")
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// toolModule is testdata/tool built for wasip1: its path and digest.
func toolModule(t testing.TB) (path, digest string) {
	t.Helper()
	modules.once.Do(func() {
		out := filepath.Join(modules.dir, "tool.wasm")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/tool")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			modules.err = fmt.Errorf("building testdata/tool for wasip1: %v\n%s", err, b)
			return
		}
		modules.tool = out
	})
	if modules.err != nil {
		t.Fatal(modules.err)
	}
	b, err := os.ReadFile(modules.tool)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return modules.tool, "sha256:" + hex.EncodeToString(sum[:])
}

// newRunner is a Runner closed when the test ends; cfg.CacheDir "" means the shared test cache.
func newRunner(t testing.TB, cfg Config) *Runner {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = modules.cache
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// toolCall is a call of testdata/tool with input in, in a fresh workdir unless the call names one.
func toolCall(t testing.TB, in map[string]any) Call {
	t.Helper()
	path, digest := toolModule(t)
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return Call{Name: "tool", Path: path, Digest: digest, Input: b, Workdir: t.TempDir()}
}

func mustRun(t testing.TB, r *Runner, call Call) Result {
	t.Helper()
	res, err := r.Run(context.Background(), call)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}
