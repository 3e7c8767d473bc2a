package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/artifact/wit"
)

// Host answers a WIT level-2 module's calls of the host module "murmur" (package wit): fn is
// wit.FnManagePull or wit.FnRunInference, request the bytes the module passed, and the answer is the JSON
// written back, a refusal included ({"error": "<token>: <text>"}). ctx is the call's run context: it ends
// with the call's time limit, the caller's cancel and Close. wit.Functions is one.
type Host interface {
	Call(ctx context.Context, fn string, request []byte) []byte
}

// hostSigs are the functions of the host module and their parameters; each returns one i32.
var hostSigs = map[string][]api.ValueType{
	wit.FnManagePull:   {api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32},
	wit.FnRunInference: {api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32},
	wit.FnAnswer:       {api.ValueTypeI32, api.ValueTypeI32},
}

// hostList names the host module's functions with their signatures, for an error.
const hostList = wit.Module + "." + wit.FnManagePull + "(i32, i32, i32, i32) -> i32, " +
	wit.Module + "." + wit.FnRunInference + "(i32, i32, i32, i32) -> i32 and " +
	wit.Module + "." + wit.FnAnswer + "(i32, i32) -> i32"

// hostCall is one call's state of the host module, which every instance shares: the call's Host and the
// last answer it gave. It travels in the context the module is instantiated with; a module's host calls
// are made one at a time on its own goroutine.
type hostCall struct {
	host Host
	last []byte
}

type hostKey struct{}

// withHost is ctx carrying a fresh host state for one call; a nil h answers as wit.Functions{} does.
func withHost(ctx context.Context, h Host) context.Context {
	if h == nil {
		h = wit.Functions{}
	}
	return context.WithValue(ctx, hostKey{}, &hostCall{host: h})
}

// instantiateHost adds the host module to the runtime.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	i32 := []api.ValueType{api.ValueTypeI32}
	b := rt.NewHostModuleBuilder(wit.Module)
	for _, fn := range []string{wit.FnManagePull, wit.FnRunInference} {
		b = b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				stack[0] = api.EncodeU32(call(ctx, mod, fn, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]),
					api.DecodeU32(stack[2]), api.DecodeU32(stack[3])))
			}), hostSigs[fn], i32).
			WithParameterNames("req_ptr", "req_len", "ans_ptr", "ans_cap").
			Export(fn)
	}
	b = b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			stack[0] = api.EncodeU32(answer(ctx, mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		}), hostSigs[wit.FnAnswer], i32).
		WithParameterNames("ans_ptr", "ans_cap").
		Export(wit.FnAnswer)
	_, err := b.Instantiate(ctx)
	return err
}

// call is manage_pull and run_inference: the request at reqPtr goes to the call's Host, whose answer is
// kept and written at ansPtr when it fits ansCap; it returns the answer's length.
func call(ctx context.Context, mod api.Module, fn string, reqPtr, reqLen, ansPtr, ansCap uint32) uint32 {
	hc := state(ctx, fn)
	req := span(mod, fn, "request", reqPtr, reqLen)
	buf := span(mod, fn, "answer buffer", ansPtr, ansCap)
	stopped(ctx, mod) // a stopped call asks nothing more of its Host
	ans := hc.host.Call(ctx, fn, bytes.Clone(req))
	stopped(ctx, mod) // nor is an answer given after the stop: the module ends as the stop ends it
	if len(ans) > math.MaxUint32 {
		panic(fmt.Sprintf("%s.%s: the answer is %d bytes, more than a module's memory holds", wit.Module, fn, len(ans)))
	}
	hc.last = ans
	traceCall(ctx, fn, ans)
	if len(ans) <= len(buf) {
		copy(buf, ans)
	}
	return uint32(len(ans))
}

// answer is the host function answer: the last answer, copied to ansPtr when it fits ansCap; its length.
func answer(ctx context.Context, mod api.Module, ansPtr, ansCap uint32) uint32 {
	hc := state(ctx, wit.FnAnswer)
	buf := span(mod, wit.FnAnswer, "answer buffer", ansPtr, ansCap)
	if len(hc.last) <= len(buf) {
		copy(buf, hc.last)
	}
	return uint32(len(hc.last))
}

// traceCall puts one host call on the run's span (ctx's, Runner.Run): the function, its answer's length
// and, for a refusal ({"error": "<token>: <text>"}), its token; nothing of the request or the answer.
func traceCall(ctx context.Context, fn string, ans []byte) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{conv.HostCallFunction.String(fn), conv.HostCallAnswerBytes.Int(len(ans))}
	var refusal struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(ans, &refusal) == nil && refusal.Error != "" {
		token, _, _ := strings.Cut(refusal.Error, ":")
		attrs = append(attrs, conv.HostCallRefusal.String(token))
	}
	span.AddEvent(conv.EventHostCall, trace.WithAttributes(attrs...))
}

func state(ctx context.Context, fn string) *hostCall {
	hc, ok := ctx.Value(hostKey{}).(*hostCall)
	if !ok {
		panic(fmt.Sprintf("%s.%s: called outside a Runner's call", wit.Module, fn)) // a bug of this package
	}
	return hc
}

// span is the module's memory at [ptr, ptr+n), the bytes themselves; a span outside the memory traps the
// module with a message saying which.
func span(mod api.Module, fn, what string, ptr, n uint32) []byte {
	mem := mod.Memory()
	if mem == nil {
		panic(fmt.Sprintf("%s.%s: the module has no memory", wit.Module, fn))
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		panic(fmt.Sprintf("%s.%s: the %s at %d, %d bytes long, is outside the module's memory of %d bytes",
			wit.Module, fn, what, ptr, n, mem.Size()))
	}
	return b
}

// stopped ends the module, as wazero ends one when its context ends, once ctx has: wazero checks for a
// stop only in the module's own code, and a Host that returned because of the stop must not hand the
// module an answer it could still write as its result.
func stopped(ctx context.Context, mod api.Module) {
	var code uint32
	switch {
	case ctx.Err() == nil:
		return
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		code = sys.ExitCodeDeadlineExceeded
	default:
		code = sys.ExitCodeContextCanceled
	}
	_ = mod.CloseWithExitCode(ctx, code)
	panic(sys.NewExitError(code))
}

// checkHostImport checks one import of the host module: a function it has, with its signature.
func checkHostImport(f api.FunctionDefinition) error {
	_, name, _ := f.Import()
	params, ok := hostSigs[name]
	if !ok || !slices.Equal(f.ParamTypes(), params) || !slices.Equal(f.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
		return fmt.Errorf("it imports %s.%s%s; from %s a module may import only %s", wit.Module, name, signature(f), wit.Module, hostList)
	}
	return nil
}

// signature is a function's signature as hostList writes it.
func signature(f api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		var s []string
		for _, t := range ts {
			s = append(s, api.ValueTypeName(t))
		}
		return strings.Join(s, ", ")
	}
	sig := "(" + names(f.ParamTypes()) + ")"
	switch len(f.ResultTypes()) {
	case 0:
	case 1:
		sig += " -> " + names(f.ResultTypes())
	default:
		sig += " -> (" + names(f.ResultTypes()) + ")"
	}
	return sig
}

// hostImports are the host module's functions a compiled module imports, sorted, each once.
func hostImports(cm wazero.CompiledModule) []string {
	var fns []string
	for _, f := range cm.ImportedFunctions() {
		if mod, name, _ := f.Import(); mod == wit.Module {
			fns = append(fns, name)
		}
	}
	slices.Sort(fns)
	return slices.Compact(fns)
}

// HostImports returns the functions of the host module "murmur" the call's module imports, sorted: none
// for a level-1 module. The module is compiled through the Runner's cache as Compile does, and a module
// this Runner would not run is ErrInvalidModule.
func (r *Runner) HostImports(ctx context.Context, call Call) ([]string, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	r.calls.Add(1)
	r.mu.Unlock()
	defer r.calls.Done()
	cm, _, err := r.module(ctx, call)
	if err != nil {
		return nil, err
	}
	return hostImports(cm), nil
}

// HostImports is Runner.HostImports for a module's bytes without a Runner (mur check): it decodes and
// validates the module with wazero's interpreter, compiling no machine code, and refuses what a Runner
// refuses with ErrInvalidModule.
func HostImports(ctx context.Context, code []byte) ([]string, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(context.WithoutCancel(ctx))
	cm, err := rt.CompileModule(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	if err := commandModule(cm); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	return hostImports(cm), nil
}
