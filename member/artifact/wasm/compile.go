package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// compiled is one module's compilation, shared by the calls of its digest; ready is closed once mod or
// err is set.
type compiled struct {
	ready chan struct{}
	mod   wazero.CompiledModule
	err   error
}

// module returns the call's compiled module, compiling it if this Runner has no copy; cold is true for
// the call that compiled it.
func (r *Runner) module(ctx context.Context, call Call) (cm wazero.CompiledModule, cold bool, err error) {
	var code []byte
	digest := call.Digest
	if digest == "" {
		if code, err = call.bytes(); err != nil {
			return nil, false, err
		}
		digest = digestOf(code)
	}
	r.mu.Lock()
	c, ok := r.mods[digest]
	if !ok {
		c = &compiled{ready: make(chan struct{})}
		r.mods[digest] = c
	}
	r.mu.Unlock()
	if ok {
		select {
		case <-c.ready:
			return c.mod, false, c.err
		case <-ctx.Done():
			return nil, false, fmt.Errorf("wasm tool %s: %w", call.label(), context.Cause(ctx))
		}
	}
	// The compilation outlives a caller that gives up: the calls waiting for it still want it.
	c.mod, c.err = r.compile(context.WithoutCancel(ctx), call, code, digest)
	if c.err != nil {
		r.mu.Lock()
		delete(r.mods, digest) // a later call tries again (the file may have been fixed)
		r.mu.Unlock()
	}
	close(c.ready)
	return c.mod, true, c.err
}

func (r *Runner) compile(ctx context.Context, call Call, code []byte, digest string) (wazero.CompiledModule, error) {
	if code == nil {
		var err error
		if code, err = call.bytes(); err != nil {
			return nil, err
		}
		if got := digestOf(code); got != digest {
			return nil, fmt.Errorf("wasm tool %s: %w: the call names %s, the module's bytes are %s", call.label(), ErrDigest, digest, got)
		}
	}
	cm, err := r.rt.CompileModule(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("wasm tool %s: %w: %v", call.label(), ErrInvalidModule, err)
	}
	if err := commandModule(cm); err != nil {
		cm.Close(ctx)
		return nil, fmt.Errorf("wasm tool %s: %w: %v", call.label(), ErrInvalidModule, err)
	}
	return cm, nil
}

// commandModule checks that a compiled module can run here: it imports only WASI preview 1 and the host
// module's functions with their signatures, exports _start, and exports the memory WASI reads and writes.
func commandModule(cm wazero.CompiledModule) error {
	for _, f := range cm.ImportedFunctions() {
		switch mod, name, _ := f.Import(); mod {
		case wasi_snapshot_preview1.ModuleName:
		case wit.Module:
			if err := checkHostImport(f); err != nil {
				return err
			}
		default:
			return fmt.Errorf("it imports %s.%s; a tool module may import only %s, and at WIT level 2 %s",
				mod, name, wasi_snapshot_preview1.ModuleName, hostList)
		}
	}
	if len(cm.ImportedMemories()) > 0 {
		return errors.New("it imports its memory; a tool module defines and exports its own")
	}
	if _, ok := cm.ExportedFunctions()["_start"]; !ok {
		return errors.New("it exports no _start function: build it as a command (package main, GOOS=wasip1 GOARCH=wasm), not a library or reactor")
	}
	if len(cm.ExportedMemories()) == 0 {
		return errors.New("it exports no memory, which WASI needs")
	}
	return nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
