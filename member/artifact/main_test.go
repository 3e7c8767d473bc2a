package artifact

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the helper processes of the multi-process tests: with ARTIFACT_TEST_HELPER
// set, it does that job instead of running tests.
func TestMain(m *testing.M) {
	switch os.Getenv("ARTIFACT_TEST_HELPER") {
	case "":
		goleak.VerifyTestMain(m)
	case "pin":
		os.Exit(helperPin())
	case "rewrite":
		os.Exit(helperRewrite())
	default:
		fmt.Fprintln(os.Stderr, "unknown ARTIFACT_TEST_HELPER")
		os.Exit(2)
	}
}

// helperPin pins ARTIFACT_TEST_COUNT pins named ARTIFACT_TEST_SCOPE/p<i> into ARTIFACT_TEST_LOCK, one
// UpdateLock each, after waiting for ARTIFACT_TEST_GO to exist so that both processes start together.
func helperPin() int {
	path, scope := os.Getenv("ARTIFACT_TEST_LOCK"), os.Getenv("ARTIFACT_TEST_SCOPE")
	n, _ := strconv.Atoi(os.Getenv("ARTIFACT_TEST_COUNT"))
	for {
		if _, err := os.Stat(os.Getenv("ARTIFACT_TEST_GO")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		p := testPin(Name(fmt.Sprintf("%s/p%d", scope, i)), "1.0.0")
		if err := UpdateLock(context.Background(), path, func(l *Lock) error { return l.Add(p) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// helperRewrite rewrites ARTIFACT_TEST_LOCK forever, alternating between crashLock(0) and crashLock(1),
// and says "ready" once the first write is done. The test kills it.
func helperRewrite() int {
	path := os.Getenv("ARTIFACT_TEST_LOCK")
	for i := 0; ; i++ {
		if err := UpdateLock(context.Background(), path, func(l *Lock) error {
			*l = *crashLock(i % 2)
			return nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i == 0 {
			fmt.Println("ready")
		}
	}
}

// crashLock is one of two large locks (a torn write of either is easy to tell from both).
func crashLock(which int) *Lock {
	l := &Lock{}
	for i := range 200 {
		p := testPin(Name(fmt.Sprintf("crash/p%03d", i)), fmt.Sprintf("%d.0.0", which+1))
		l.Pins = append(l.Pins, p)
	}
	return l
}

// testPin is an operator's pin of name@version from the project store with a digest derived from both.
func testPin(name Name, version string) Pin {
	return Pin{Name: name, Version: version, Digest: fakeDigest(string(name) + "@" + version), Origin: OriginOperator, Source: ProjectStore}
}

func fakeDigest(seed string) string {
	const hexd = "0123456789abcdef"
	b := make([]byte, 64)
	h := uint32(2166136261)
	for i := range b {
		for _, c := range []byte(seed) {
			h = (h ^ uint32(c)) * 16777619
		}
		h = (h ^ uint32(i)) * 16777619
		b[i] = hexd[h%16]
	}
	return DigestPrefix + string(b)
}

// wasmHead is the start of every WebAssembly module: the magic number and version 1.
const wasmHead = "\x00asm\x01\x00\x00\x00"

// writeFiles writes files (slash paths relative to dir) into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// toolManifest is the murmur.yaml of a tool artifact.
func toolManifest(name, version string, wit int) string {
	return fmt.Sprintf("name: %s\nversion: %s\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\ndescription: a test tool\nwit_level: %d\n", name, version, wit)
}

// putTool writes a tool artifact into store and returns its directory.
func putTool(t *testing.T, store, name, version string, wit int) string {
	t.Helper()
	n := Name(name)
	dir := filepath.Join(store, n.Scope(), n.Tool(), version)
	writeFiles(t, dir, map[string]string{"murmur.yaml": toolManifest(name, version, wit), "tool.wasm": wasmHead + name + version})
	return dir
}
