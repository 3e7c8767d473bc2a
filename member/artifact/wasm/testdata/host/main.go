// Command host is the WIT level-2 test module of package wasm, built with GOOS=wasip1 GOARCH=wasm by the
// tests. Its input says which host function to call with what:
//
//	{"pull": "local/x"}                                        guest.Pull
//	{"infer": {"messages": [...]}}                             guest.Infer
//	{"raw": {"fn": "manage_pull", "request": "…", "cap": 8}}   the import itself (or answer alone), with the request's bytes
//	                                                           as given and a buffer of cap bytes, then answer;
//	                                                           data is the answer's bytes as a string
//	{"oob": "request" | "answer"}                              manage_pull with a span outside the memory
//
// It answers {"status": "ok", "output": "<how it went>", "data": <the answer, or the refusal's text>};
// output is "answer", "refusal" for a *wit.Refusal, "error" for another error, or for raw
// "<first length> <answer's length>".
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/artifact/wit/guest"
)

//go:wasmimport murmur manage_pull
func managePull(reqPtr unsafe.Pointer, reqLen uint32, ansPtr unsafe.Pointer, ansCap uint32) uint32

//go:wasmimport murmur run_inference
func runInference(reqPtr unsafe.Pointer, reqLen uint32, ansPtr unsafe.Pointer, ansCap uint32) uint32

//go:wasmimport murmur answer
func answer(ansPtr unsafe.Pointer, ansCap uint32) uint32

// managePullAt is manage_pull with its pointers as numbers, to pass one outside the memory.
//
//go:wasmimport murmur manage_pull
func managePullAt(reqPtr, reqLen, ansPtr, ansCap uint32) uint32

type input struct {
	Pull  *string               `json:"pull"`
	Infer *wit.InferenceRequest `json:"infer"`
	Raw   *struct {
		Fn      string `json:"fn"`
		Request string `json:"request"`
		Cap     uint32 `json:"cap"`
	} `json:"raw"`
	OOB string `json:"oob"`
}

func main() {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		result("error", err.Error(), nil)
		return
	}
	var in input
	if err := json.Unmarshal(b, &in); err != nil {
		result("error", "bad input: "+err.Error(), nil)
		return
	}
	switch {
	case in.Pull != nil:
		data, err := guest.Pull(*in.Pull)
		outcome(data, err)
	case in.Infer != nil:
		ans, err := guest.Infer(*in.Infer)
		if err != nil {
			outcome(nil, err)
			return
		}
		data, _ := json.Marshal(ans)
		outcome(data, nil)
	case in.Raw != nil:
		req := []byte(in.Raw.Request)
		buf := make([]byte, in.Raw.Cap+1) // never empty, so &buf[0] is a pointer
		var n uint32
		switch in.Raw.Fn {
		case wit.FnManagePull:
			n = managePull(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)), unsafe.Pointer(&buf[0]), in.Raw.Cap)
		case wit.FnRunInference:
			n = runInference(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)), unsafe.Pointer(&buf[0]), in.Raw.Cap)
		case wit.FnAnswer: // with no call before it
			n = answer(unsafe.Pointer(&buf[0]), in.Raw.Cap)
		}
		first := n
		if n > in.Raw.Cap {
			buf = make([]byte, n)
			n = answer(unsafe.Pointer(&buf[0]), n)
		}
		result("ok", fmt.Sprintf("%d %d", first, n), string(buf[:n]))
	case in.OOB != "":
		buf := make([]byte, 16)
		req := []byte(`{"artifact": "local/x"}`)
		const huge = 0xffff_ff00 // far past the memory of a small module
		if in.OOB == "request" {
			managePullAt(huge, uint32(len(req)), uint32(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf)))
		} else {
			managePullAt(uint32(uintptr(unsafe.Pointer(&req[0]))), uint32(len(req)), huge, 0x1000)
		}
		result("ok", "no trap", nil)
	default:
		result("error", "no function asked", nil)
	}
}

// outcome answers with a host function's answer or refusal.
func outcome(data json.RawMessage, err error) {
	var r *wit.Refusal
	switch {
	case errors.As(err, &r):
		result("ok", "refusal", r.Text)
	case err != nil:
		result("ok", "error", err.Error())
	default:
		result("ok", "answer", data)
	}
}

func result(status, output string, data any) {
	json.NewEncoder(os.Stdout).Encode(map[string]any{"status": status, "output": output, "data": data})
}
