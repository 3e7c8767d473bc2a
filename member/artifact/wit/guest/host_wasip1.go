//go:build wasip1

package guest

import (
	"fmt"
	"unsafe"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

//go:wasmimport murmur manage_pull
func managePull(reqPtr unsafe.Pointer, reqLen uint32, ansPtr unsafe.Pointer, ansCap uint32) uint32

//go:wasmimport murmur run_inference
func runInference(reqPtr unsafe.Pointer, reqLen uint32, ansPtr unsafe.Pointer, ansCap uint32) uint32

//go:wasmimport murmur answer
func answer(ansPtr unsafe.Pointer, ansCap uint32) uint32

// roundTrip offers a buffer of BufferSize for the answer; when the answer is longer, the host function
// answer copies it into one of its length.
func roundTrip(fn string, req []byte) ([]byte, error) {
	buf := make([]byte, BufferSize)
	var n uint32
	switch fn {
	case wit.FnManagePull:
		n = managePull(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)), unsafe.Pointer(&buf[0]), uint32(len(buf)))
	case wit.FnRunInference:
		n = runInference(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)), unsafe.Pointer(&buf[0]), uint32(len(buf)))
	default:
		return nil, fmt.Errorf("%s is not a function of the host module %s", fn, wit.Module)
	}
	if int(n) <= len(buf) {
		return buf[:n], nil
	}
	buf = make([]byte, n)
	if got := answer(unsafe.Pointer(&buf[0]), n); got != n {
		return nil, fmt.Errorf("%s.%s: the answer was %d bytes, then %d", wit.Module, wit.FnAnswer, n, got)
	}
	return buf, nil
}
