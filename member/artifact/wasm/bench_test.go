package wasm

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkWasmCall measures one call of a small tool module (sum three numbers) and reports each way
// as a multiple of a shell binary's call with the same JSON on stdin (cat, through os/exec): warm (the
// compiled module in the Runner's memory), disk (a new Runner whose cache directory has the module:
// another session, or the next process), cold (a new Runner and an empty cache directory: compiled).
func BenchmarkWasmCall(b *testing.B) {
	path, digest := toolModule(b)
	input := []byte(`{"op": "sum", "numbers": [1, 2, 3]}`)
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("no cat for the shell baseline")
	}
	shellCall := func(b *testing.B) {
		cmd := exec.Command(cat)
		cmd.Stdin = bytes.NewReader(input)
		if out, err := cmd.Output(); err != nil || !bytes.Equal(out, input) {
			b.Fatalf("cat: %q, %v", out, err)
		}
	}
	// The baseline, measured once here so that every way reports its ratio to it.
	const baselineRuns = 50
	start := time.Now()
	for range baselineRuns {
		shellCall(b)
	}
	shell := float64(time.Since(start).Nanoseconds()) / baselineRuns
	ratio := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/shell, "x-shell")
	}
	call := func(b *testing.B, r *Runner) Result {
		res, err := r.Run(context.Background(), Call{Name: "sum", Path: path, Digest: digest, Input: input, Workdir: b.TempDir()})
		if err != nil || res.Status != StatusOK || res.Output != "6" {
			b.Fatalf("%+v, %v", res, err)
		}
		return res
	}
	fresh := func(b *testing.B, dir string) *Runner {
		r, err := New(Config{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}

	b.Run("shell", func(b *testing.B) {
		for b.Loop() {
			shellCall(b)
		}
		ratio(b)
	})
	b.Run("warm", func(b *testing.B) {
		r := newRunner(b, Config{CacheDir: b.TempDir()})
		call(b, r)
		for b.Loop() {
			if call(b, r).Cold {
				b.Fatal("a warm call compiled")
			}
		}
		ratio(b)
	})
	b.Run("disk", func(b *testing.B) {
		dir := b.TempDir()
		r := fresh(b, dir)
		call(b, r)
		r.Close()
		for b.Loop() {
			r := fresh(b, dir)
			call(b, r)
			r.Close()
		}
		ratio(b)
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			r := fresh(b, b.TempDir())
			call(b, r)
			r.Close()
		}
		ratio(b)
	})
}
