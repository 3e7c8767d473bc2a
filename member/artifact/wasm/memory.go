package wasm

import (
	"math"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// memory backs one instance's linear memory and enforces the call's memory limit. wazero's own limit
// (RuntimeConfig.WithMemoryLimitPages) is one per runtime, so it could not differ per call, and it refuses
// a memory.grow before any hook sees it; here the refusal is recorded, which is how a module that then
// fails is reported as stopped by its memory limit rather than as failing on its own.
//
// The memory is an anonymous mapping of the limit's size, reserved but not committed: a grow moves no
// bytes (a Go slice grown by doubling copied the whole memory each time, a third of a warm call), pages
// cost only once touched, and release hands them straight back to the kernel rather than to the Go heap.
// Where the mapping cannot be made it grows on the Go heap.
type memory struct {
	limit   uint64 // bytes
	mapped  []byte // the reservation; nil: buf is on the Go heap
	buf     []byte
	made    bool          // the initial allocation is done
	refused atomic.Uint64 // the size of the largest grow refused; 0: none
}

var (
	_ experimental.MemoryAllocator = (*memory)(nil)
	_ experimental.LinearMemory    = (*memory)(nil)
)

// Allocate is called once, when the instance is made, with the module's largest memory; Run has checked
// that its initial memory fits the limit.
func (m *memory) Allocate(_, most uint64) experimental.LinearMemory {
	if n := min(m.limit, most); n > 0 && n <= math.MaxInt {
		b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
		if err == nil {
			m.mapped = b
		}
	}
	return m
}

// Reallocate grows the memory to size bytes, or returns nil past the limit, which the module sees as a
// failed memory.grow.
func (m *memory) Reallocate(size uint64) []byte {
	if size > m.limit && m.made {
		if size > m.refused.Load() {
			m.refused.Store(size)
		}
		return nil
	}
	m.made = true
	if m.mapped != nil {
		if size > uint64(len(m.mapped)) {
			return nil // past the module's own maximum, which wazero checks first
		}
		m.buf = m.mapped[:size]
		return m.buf
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Double, as append would, but never past the limit, so a module near it is not charged for
	// capacity it cannot use.
	c := max(size, min(2*uint64(cap(m.buf)), m.limit))
	b := make([]byte, size, c)
	copy(b, m.buf)
	m.buf = b
	return b
}

// Free does nothing: wazero calls it when the instance closes, which a module's proc_exit does from the
// module's own stack; Run calls release once the instance is gone.
func (m *memory) Free() {}

// release unmaps the memory. Nothing may use it after.
func (m *memory) release() {
	if m.mapped != nil {
		_ = unix.Munmap(m.mapped) // fails only for what mmap did not map (EINVAL); Allocate mapped it
		m.mapped = nil
	}
	m.buf = nil
}
