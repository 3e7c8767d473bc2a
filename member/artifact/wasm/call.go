package wasm

import (
	"fmt"
	"os"
	"time"
)

// Call is one run of a tool module.
type Call struct {
	// Name is the tool's name: the module's argv[0] and the name in errors.
	Name string
	// Module holds the module's bytes; when nil they are read from Path, and only on a cold call.
	Module []byte
	Path   string
	// Digest is "sha256:<hex>" of the module's bytes, the key of the compiled-module cache; "" has the
	// Runner hash the bytes, which then reads them on every call.
	Digest string
	// Input is written to the module's stdin.
	Input []byte
	// Workdir is the directory the module sees as "/", read-write; it must exist.
	Workdir string
	// Timeout stops the module after this long; 0: no limit but the context's.
	Timeout time.Duration
	// MemoryMB bounds the module's linear memory; 0: WebAssembly's own 4 GiB.
	MemoryMB int
	// OutputLimit keeps the last OutputLimit bytes of the result's output; 0 keeps it whole.
	OutputLimit int
	// Host answers the module's calls of the host module "murmur" (WIT level 2); nil refuses every one
	// not-granted:, as wit.Functions{} does.
	Host Host
}

// bytes reads the module: its bytes if given, else its file.
func (c Call) bytes() ([]byte, error) {
	if c.Module != nil {
		return c.Module, nil
	}
	if c.Path == "" {
		return nil, fmt.Errorf("wasm tool %s: neither the module's bytes nor its path given", c.label())
	}
	b, err := os.ReadFile(c.Path)
	if err != nil {
		return nil, fmt.Errorf("wasm tool %s: reading its module: %w", c.label(), err)
	}
	return b, nil
}

// label names the call in errors: its tool name, else its module.
func (c Call) label() string {
	switch {
	case c.Name != "":
		return c.Name
	case c.Path != "":
		return c.Path
	case c.Digest != "":
		return c.Digest
	}
	return "(unnamed)"
}
