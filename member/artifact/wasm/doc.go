// Package wasm runs tool and hook artifacts: WebAssembly modules built as WASI preview-1 commands
// (GOOS=wasip1 GOARCH=wasm is the reference), on github.com/tetratelabs/wazero, pure Go.
//
// # The contract with a module
//
// One call is one run of the module's _start. The module reads the call's input JSON on stdin and writes
// one JSON object on stdout, and nothing else there:
//
//	{"status": "ok" | "error", "output": "…", "data": …}
//
// status is required; output (a string) and data (any JSON) may be left out; another key is an error, so a
// misspelt key is caught rather than ignored. Anything else on stdout (text, a second value, the wrong
// shape, nothing at all, more than Config.ResultLimit bytes), a trap, or an exit without a result is not an
// answer: Run returns a Result whose Failure says what the module did wrong, with the tail of its stderr.
// When a well-formed result was written the result decides, whatever the exit code (reported beside it).
//
// # What a module sees
//
//   - Files: the call's workdir, read-write, mounted at "/" and nothing else: "/notes.txt" and
//     "notes.txt" name the workdir's notes.txt, "/etc/passwd" names workdir/etc/passwd (absent, as a
//     rule), and ".." stops at the top as it does at a real root (Go and wasi-libc clean it away; a
//     path_open with ".." in it is refused, EPERM). "/" was chosen over a "/work" mount because
//     wasi-libc languages (C, Rust) resolve relative paths from "/", so the workdir is where every
//     language's relative paths land. The mount is an os.Root, not wazero's directory mount: a symbolic
//     link is followed only while it stays inside the workdir, so a link made by the module (or by a
//     shell command) cannot lead out of it (EPERM); wazero's own mount follows links anywhere on the host.
//     Only regular files and directories open: a FIFO, a socket or a device (a shell command can make the
//     first two in the workdir), or a link to one, is refused at once with ENOTSUP, since reading one
//     waits inside a host call that neither the time limit nor a cancel can interrupt. stat shows them.
//   - argv is the tool's name alone; the environment is empty (no variable is passed, so nothing of the
//     host leaks through it; Go's wasip1 runtime then takes "/" as its working directory).
//   - Clocks are the host's wall and monotonic clocks; random is crypto/rand; a sleep really sleeps and
//     ends early when the call is stopped. wazero's defaults (a fixed fake clock, a seeded random
//     source, sleeps that return at once) would surprise a tool author.
//   - No network: no socket is configured, and WASI preview 1 has no way to make one.
//
// # Host functions (WIT level 2)
//
// Besides WASI preview 1 a module may import three functions of the host module "murmur" (package wit;
// package wit/guest is the Go helper), all of i32s; any other import is ErrInvalidModule:
//
//	manage_pull(req_ptr, req_len, ans_ptr, ans_cap) -> ans_len
//	run_inference(req_ptr, req_len, ans_ptr, ans_cap) -> ans_len
//	answer(ans_ptr, ans_cap) -> ans_len
//
// The first two hand the req_len bytes at req_ptr to Call.Host (nil refuses not-granted:) and return the
// answer's length, having written it at ans_ptr only when it fits ans_cap; answer copies that last answer
// likewise, so a bigger one is fetched into a buffer of its length without asking twice. An answer is JSON,
// a refusal {"error": "<token>: <text>"}. A span outside the module's memory traps it. The Host gets the
// call's run context, so the time limit, a cancel and Close end a Host that waits on it, and the module
// with it; one that ignores it is given up on as a blocked host call is (see Limits). HostImports lists
// the functions a module imports: none at level 1.
//
// # Limits
//
// Call.Timeout bounds the run (the module is closed through its context, and a sleeping module wakes);
// Call.MemoryMB bounds its linear memory, enforced by an allocator handed to wazero for that one
// instance, so the limit can differ per call and a refused memory.grow is seen, which is how a run that
// failed after one is told apart from other failures: Result.Stopped says which limit stopped it and
// Result.Limit says it in words ("its time limit of 5s", "its memory limit of 64 MB"). The result's output
// is cut to its last Call.OutputLimit bytes, with its whole length in OutputBytes, as shell output is.
//
// wazero stops a module only in the module's own code, never inside a host call, so a host call that
// waits (a read on a hung network filesystem, say) would hold its Run past any limit. Run therefore
// waits for the module no more than a grace of a second once the call's context ends (its time limit,
// the caller's cancel, Close): it answers as that stop does and leaves the module's goroutine to free the
// instance, its memory and its workdir handle when the host call returns, and logs both
// (Config.Logger).
//
// # Compiled modules
//
// A module is compiled once per Runner and digest ("sha256:<hex>" of the module's bytes; checked when the
// bytes are read, so a wrong digest cannot poison the cache), kept in memory, and shared by every later
// call: a warm call instantiates without reading or compiling anything. Compile does it ahead of the
// first call (at staging or a pull), which also refuses there a module that cannot run. With
// Config.CacheDir, wazero's compilation cache keeps the machine code on disk, so a new Runner (another
// session, the next process) loads rather than compiles.
//
// # Concurrency
//
// A Runner is safe for concurrent use: every call gets its own instance (memory, stdio, mount) of the
// shared compiled module; calls of one digest that arrive while it compiles wait for that one compilation.
// Several Runners, in one process or several, may share a CacheDir: wazero writes each entry to a temporary
// file and renames it into place. Close stops the calls in flight (they return ErrClosed), waits for them,
// and frees the compiled modules; a module still blocked in a host call after a few seconds is left the
// runtime, which the last such module frees when it returns, and Close says so in its error.
//
// # Errors
//
// Run's error (and Compile's) is for a call that could not be made: ErrDigest, ErrInvalidModule (not a
// WASI command module wazero can compile: a truncated file, another import, no _start), ErrClosed, an
// unreadable module or workdir, or the caller's context ending (its cause is returned). What the module
// did is always a Result.
//
// # Tracing
//
// Each Run is a span, "murmur.wasm {module}", the child of the span its context carries (package
// member/spans/nest: none without a recording one), with the result's status, the exit code, the limit
// that stopped the module and whether the run compiled it; each host call is an event on it,
// murmur.host_call, with the function, the answer's length and a refusal's token.
package wasm
