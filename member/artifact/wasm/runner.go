package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/spans/nest"
)

// Sentinel errors of Run; each is wrapped with the detail.
var (
	// ErrClosed: the Runner was closed before or during the call.
	ErrClosed = errors.New("the wasm runner is closed")
	// ErrDigest: the module's bytes do not have the digest the call named.
	ErrDigest = errors.New("the module's digest does not match")
	// ErrInvalidModule: the bytes are not a WASI preview-1 command module wazero can compile.
	ErrInvalidModule = errors.New("not a runnable WASI command module")
)

// errStuck is Close's error when calls it gave up on are still blocked in a host call after closeWait.
var errStuck = errors.New("calls still blocked in a host call")

// errTimeLimit is the cause of a call's context when its own time limit ended it, which tells it apart
// from the caller's context ending.
var errTimeLimit = errors.New("the call's time limit")

// DefaultResultLimit is Config.ResultLimit when it is zero: a result document may be this large.
const DefaultResultLimit = 4 << 20

// diagTail is how much of stderr (and of stdout that is not a result) a failure shows.
const diagTail = 4 << 10

const pageBytes = 64 << 10 // a WebAssembly page

// The watchdog's bounds. A stopped module returns at once unless it is inside a host call that waits
// (wazero checks for a stop only in the module's own code): stopGrace is how long Run waits for it before
// it answers without it, closeWait how long Close waits for such calls before it leaves the runtime to them.
const (
	stopGrace = time.Second
	closeWait = 5 * time.Second
)

// Config is what a Runner is built from.
type Config struct {
	// CacheDir keeps compiled machine code across Runners and processes (wazero's compilation cache; the
	// session puts it under the data directory). It is created if missing. "" keeps compiled modules in
	// this Runner's memory only.
	CacheDir string
	// ResultLimit is the most a module may write on stdout, in bytes; 0 means DefaultResultLimit.
	ResultLimit int
	// Logger is told of a call Run stopped waiting for (see Run) and of its end; nil discards.
	Logger *slog.Logger
}

// Runner runs tool modules; see the package documentation for its contract.
type Runner struct {
	rt          wazero.Runtime
	cache       wazero.CompilationCache
	resultLimit int
	log         *slog.Logger
	closeWait   time.Duration // closeWait; a test shortens it
	// workdirFS is the module's view of a workdir; a test puts a filesystem that blocks in front of it.
	workdirFS func(*os.Root) experimentalsys.FS

	life    context.Context // ended by Close, which stops the calls in flight
	stopAll context.CancelCauseFunc
	modules sync.WaitGroup // the goroutines running a module, Run's own and those it stopped waiting for
	freed   chan struct{}  // closed once the runtime is freed

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
	mods   map[string]*compiled // by digest
}

// New builds a Runner: the wazero runtime, with WASI preview 1, the host module "murmur" and the
// compilation cache.
func New(cfg Config) (*Runner, error) {
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("the wasm compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	_, err := wasi_snapshot_preview1.Instantiate(ctx, rt)
	if err != nil {
		err = fmt.Errorf("instantiating WASI preview 1: %w", err)
	} else if err = instantiateHost(ctx, rt); err != nil {
		err = fmt.Errorf("instantiating the host module %s: %w", wit.Module, err)
	}
	if err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, err
	}
	limit := cfg.ResultLimit
	if limit <= 0 {
		limit = DefaultResultLimit
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	life, stop := context.WithCancelCause(context.Background())
	return &Runner{rt: rt, cache: cache, resultLimit: limit, log: log, closeWait: closeWait,
		workdirFS: func(root *os.Root) experimentalsys.FS { return &rootFS{root: root} },
		life:      life, stopAll: stop, freed: make(chan struct{}), mods: map[string]*compiled{}}, nil
}

// Close stops the calls in flight, waits for them, and frees the runtime and its compiled modules. The
// compilation cache directory keeps its entries.
//
// A call whose module is blocked in a host call ends its Run within the grace all the same, but its
// module cannot be freed under it: freeing the runtime unmaps the machine code it returns into. Close
// waits a few seconds for such modules, then returns errStuck and leaves the freeing to the last of them.
func (r *Runner) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.stopAll(ErrClosed)
	r.calls.Wait() // every Run returns within the grace of the stop
	freed := make(chan error)
	gaveUp := make(chan struct{})
	go func() {
		r.modules.Wait()
		err := r.free()
		select {
		case freed <- err:
		case <-gaveUp:
			r.log.Info("wasm runner freed after its blocked calls returned", "error", err)
		}
	}()
	t := time.NewTimer(r.closeWait)
	defer t.Stop()
	select {
	case err := <-freed:
		return err
	case <-t.C:
		close(gaveUp)
		r.log.Warn("wasm runner closed with calls still blocked in a host call; it is freed when they return", "waited", r.closeWait)
		return fmt.Errorf("closing the wasm runner: %w after %s; the runtime is freed when they return", errStuck, r.closeWait)
	}
}

// free closes the runtime (its compiled modules with it) and the compilation cache; nothing may run after.
func (r *Runner) free() error {
	defer close(r.freed)
	ctx := context.Background()
	err := r.rt.Close(ctx) // closes the compiled modules too
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// Compile compiles the call's module unless this Runner has it already; only the call's Name, Module,
// Path and Digest are used. Staging and a pull call it so that a module that cannot run (ErrInvalidModule,
// ErrDigest) is refused then, and the first call is warm.
func (r *Runner) Compile(ctx context.Context, call Call) error {
	if !r.enter() {
		return ErrClosed
	}
	defer r.calls.Done()
	_, _, err := r.module(ctx, call)
	return err
}

// Run runs the module once with the call's input, workdir and limits. Once the call is stopped (its time
// limit, ctx, Close) it returns within a grace of a second, even when the module is blocked in a host
// call: see the package documentation.
//
// The run is a span, "murmur.wasm {module}", the child of ctx's span (a tool call's, a hook run's;
// package member/spans/nest), with one event per host call.
func (r *Runner) Run(ctx context.Context, call Call) (Result, error) {
	attrs := []attribute.KeyValue{conv.WasmModule.String(call.label())}
	if call.Digest != "" {
		attrs = append(attrs, conv.WasmDigest.String(call.Digest))
	}
	ctx, span := nest.Start(ctx, conv.SpanWasm+" "+call.label(), trace.SpanKindInternal, attrs...)
	res, err := r.run(ctx, call)
	endSpan(span, res, err)
	return res, err
}

// enter counts a call in unless the Runner is closed; a call counted in ends with r.calls.Done.
func (r *Runner) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.calls.Add(1)
	return true
}

func (r *Runner) run(ctx context.Context, call Call) (Result, error) {
	if !r.enter() {
		return Result{}, ErrClosed
	}
	defer r.calls.Done()

	if call.Workdir == "" {
		return Result{}, fmt.Errorf("wasm tool %s: no workdir given", call.label())
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(r.life, func() { cancel(ErrClosed) })()

	cm, cold, err := r.module(ctx, call)
	if err != nil {
		return Result{}, err
	}
	res := Result{Cold: cold}
	if msg := startMemory(cm, call); msg != "" {
		res.stop(StopMemory, call, msg)
		return res, nil
	}
	root, err := os.OpenRoot(call.Workdir)
	if err != nil {
		return Result{}, fmt.Errorf("wasm tool %s: opening its workdir: %w", call.label(), err)
	}

	runCtx := ctx
	if call.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(ctx, call.Timeout, errTimeLimit)
		defer stop()
	}
	mem := &memory{limit: ^uint64(0)}
	if call.MemoryMB > 0 {
		mem.limit = uint64(call.MemoryMB) << 20
	}
	stdout := &capture{keep: r.resultLimit, tail: tail{max: diagTail}}
	stderr := &capture{keep: diagTail / 2, tail: tail{max: diagTail / 2}}
	ended, err := r.instantiate(runCtx, call, cm, r.moduleConfig(runCtx, call, root, stdout, stderr), mem, root)
	if !ended {
		// The module is blocked in a host call past its stop: answer as if it had stopped.
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("wasm tool %s: %w", call.label(), context.Cause(ctx))
		}
		res.Stderr, res.StderrBytes = stderr.text()
		res.stop(StopTime, call, "")
		return res, nil
	}
	return r.outcome(ctx, runCtx, call, res, err, stdout, stderr, mem)
}

// startMemory says why the module cannot start within the call's memory limit, "" when it can: the
// memory it exports needs more pages to start with than the limit holds.
func startMemory(cm wazero.CompiledModule, call Call) string {
	if call.MemoryMB <= 0 {
		return ""
	}
	for _, m := range cm.ExportedMemories() {
		if need := uint64(m.Min()) * pageBytes; need > uint64(call.MemoryMB)<<20 {
			return fmt.Sprintf("The module needs %d MB of memory to start, more than its memory limit of %d MB.",
				(need+(1<<20)-1)>>20, call.MemoryMB)
		}
	}
	return ""
}

// moduleConfig is the module's view of the call: the tool's name as argv[0], the input on stdin, stdout
// and stderr captured, the workdir (root) as "/", the clocks, and sleeps that end once runCtx does.
func (r *Runner) moduleConfig(runCtx context.Context, call Call, root *os.Root, stdout, stderr *capture) wazero.ModuleConfig {
	name := call.Name
	if name == "" {
		name = "tool"
	}
	return wazero.NewModuleConfig().
		WithName(""). // anonymous, so instances of one module can run at once
		WithArgs(name).
		WithStdin(bytes.NewReader(call.Input)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(r.workdirFS(root), "/")).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(func(ns int64) { sleep(runCtx, time.Duration(ns)) }).
		WithRandSource(rand.Reader)
}

// outcome reads into res how the module ended, err being what its run returned: the result it wrote, the
// limit that stopped it, or how it failed. A context that ended is the caller's when ctx has ended (no
// result of the module's), else the call's time limit when runCtx's cause says so.
func (r *Runner) outcome(ctx, runCtx context.Context, call Call, res Result, err error, stdout, stderr *capture, mem *memory) (Result, error) {
	var exit *sys.ExitError
	trapped := false
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	default:
		trapped = true
	}
	if c := res.ExitCode; c == sys.ExitCodeContextCanceled || c == sys.ExitCodeDeadlineExceeded {
		// wazero closed the module because a context ended: the caller's (or Close), which is no
		// result of the module's, or the call's time limit.
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("wasm tool %s: %w", call.label(), context.Cause(ctx))
		}
		if context.Cause(runCtx) == errTimeLimit {
			res.ExitCode = 0
			res.Stderr, res.StderrBytes = stderr.text()
			res.stop(StopTime, call, "")
			return res, nil
		}
	}
	res.Stderr, res.StderrBytes = stderr.text()
	if !trapped && res.answer(stdout, call.OutputLimit) {
		return res, nil
	}
	if asked := mem.refused.Load(); asked > 0 {
		res.stop(StopMemory, call, fmt.Sprintf("The module was stopped by its memory limit of %d MB: it asked for %d MB.",
			call.MemoryMB, (asked+(1<<20)-1)>>20))
		return res, nil
	}
	switch {
	case trapped:
		res.fail(fmt.Sprintf("The module failed: %s.", firstLines(err.Error(), 6)))
	case res.ExitCode != 0 && stdout.n == 0:
		res.fail(fmt.Sprintf("The module exited with code %d without writing a result.", res.ExitCode))
	default:
		res.fail(stdout.fault(r.resultLimit, call.OutputLimit))
	}
	return res, nil
}

// instantiate runs the module on a goroutine of its own, which owns mem and root and frees them once the
// module has returned. It returns true and the module's error once it has; or false when ctx ended and
// the module had not returned within the grace: it is blocked in a host call that waits (wazero stops a
// module only in its own code), and the goroutine is left to free what the call holds when that call
// returns. Either way Run answers within the grace of a stop.
func (r *Runner) instantiate(ctx context.Context, call Call, cm wazero.CompiledModule, mc wazero.ModuleConfig, mem *memory, root *os.Root) (bool, error) {
	const (
		running int32 = iota
		returned
		abandoned
	)
	var state atomic.Int32
	done := make(chan error, 1)
	var stopped time.Time // when ctx ended; set before abandoned is, read after: the state's atomics order them
	r.modules.Add(1)
	go func() {
		defer r.modules.Done()
		mod, err := r.rt.InstantiateModule(experimental.WithMemoryAllocator(withHost(ctx, call.Host), mem), cm, mc)
		if mod != nil {
			mod.Close(context.Background())
		}
		mem.release()
		root.Close()
		if !state.CompareAndSwap(running, returned) {
			r.log.Info("a wasm tool call Run had stopped waiting for has returned", "tool", call.label(),
				"since_stop", time.Since(stopped).Round(time.Millisecond))
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
	}
	stopped = time.Now()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return true, err
	case <-t.C:
	}
	if !state.CompareAndSwap(running, abandoned) {
		return true, <-done
	}
	r.log.Warn("a wasm tool call is blocked in a host call past its stop; Run answers without it, and what it holds is freed when it returns",
		"tool", call.label(), "workdir", call.Workdir, "stopped_by", context.Cause(ctx).Error(), "grace", stopGrace)
	return false, nil
}

// sleep is a WASI sleep that ends early when the call is stopped, so the module reaches a point where
// wazero closes it.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// firstLines keeps an error's first n lines: a trap carries a long stack trace.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}
