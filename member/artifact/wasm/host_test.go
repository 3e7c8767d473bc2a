package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// hostMod is testdata/host built for wasip1 once per test binary, as toolModule builds testdata/tool.
var hostMod struct {
	once sync.Once
	path string
	err  error
}

// hostModule is testdata/host built for wasip1: its path and digest.
func hostModule(t testing.TB) (path, digest string) {
	t.Helper()
	hostMod.once.Do(func() {
		out := filepath.Join(modules.dir, "host.wasm")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/host")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			hostMod.err = fmt.Errorf("building testdata/host for wasip1: %v\n%s", err, b)
			return
		}
		hostMod.path = out
	})
	if hostMod.err != nil {
		t.Fatal(hostMod.err)
	}
	b, err := os.ReadFile(hostMod.path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hostMod.path, "sha256:" + hex.EncodeToString(sum[:])
}

// hostCallOf is a call of testdata/host with input in (see its doc) and host h, in a fresh workdir.
func hostCallOf(t testing.TB, in string, h Host) Call {
	t.Helper()
	path, digest := hostModule(t)
	return Call{Name: "host", Path: path, Digest: digest, Input: []byte(in), Workdir: t.TempDir(), Host: h}
}

// fakeHost records the calls it gets and answers them with answer.
type fakeHost struct {
	answer func(ctx context.Context, fn string, req []byte) []byte
	mu     sync.Mutex
	calls  []string // "fn request"
}

func (f *fakeHost) Call(ctx context.Context, fn string, req []byte) []byte {
	f.mu.Lock()
	f.calls = append(f.calls, fn+" "+string(req))
	f.mu.Unlock()
	return f.answer(ctx, fn, req)
}

func (f *fakeHost) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// answering is a fakeHost that answers every call with ans.
func answering(ans string) *fakeHost {
	return &fakeHost{answer: func(context.Context, string, []byte) []byte { return []byte(ans) }}
}

// jsonEqual says whether two JSON texts are the same value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Errorf("%q: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Errorf("%q: %v", b, err)
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// The request's bytes reach the Host as the module passed them, with the function's name, once per call;
// the answer reaches the module: in the buffer it offered, or, when longer (100 KB against the guest
// helper's 16 KiB), whole through answer without a second call of the Host.
func TestHostCallAnswers(t *testing.T) {
	r := newRunner(t, Config{})
	big := `{"blob": "` + strings.Repeat("x", 100_000) + `"}`
	for _, tc := range []struct {
		name, in, answer string
		wantReq          string // what the Host got
		wantOutput       string
		wantData         string // JSON
	}{
		{"pull", `{"pull": "local/x"}`, `{"artifact": "local/x", "version": "1.2.0"}`,
			`manage_pull {"artifact":"local/x"}`, "answer", `{"artifact": "local/x", "version": "1.2.0"}`},
		{"infer", `{"infer": {"messages": [{"role": "user", "text": "hi"}], "max_output_tokens": 7}}`,
			`{"text": "hello", "usage": {"input": 3, "output": 1}}`,
			`run_inference {"messages":[{"role":"user","text":"hi"}],"max_output_tokens":7}`, "answer",
			`{"text": "hello", "usage": {"input": 3, "output": 1}}`},
		{"an answer of 100 KB", `{"pull": "local/big"}`, big, `manage_pull {"artifact":"local/big"}`, "answer", big},
		{"an answer that fits exactly", `{"raw": {"fn": "manage_pull", "request": "abc", "cap": 12}}`, `{"ok": true}`,
			"manage_pull abc", "12 12", `"{\"ok\": true}"`},
		{"an answer one byte too long", `{"raw": {"fn": "run_inference", "request": "", "cap": 11}}`, `{"ok": true}`,
			"run_inference ", "12 12", `"{\"ok\": true}"`},
		{"a buffer of nothing", `{"raw": {"fn": "manage_pull", "request": "q", "cap": 0}}`, `[1,2]`,
			"manage_pull q", "5 5", `"[1,2]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := answering(tc.answer)
			res := mustRun(t, r, hostCallOf(t, tc.in, h))
			if got := h.got(); len(got) != 1 || got[0] != tc.wantReq {
				t.Errorf("the Host got %q, want once %q", got, tc.wantReq)
			}
			if res.Status != StatusOK || res.Output != tc.wantOutput || !jsonEqual(t, res.Data, []byte(tc.wantData)) {
				t.Errorf("%+v; want output %q and data %.200s", res, tc.wantOutput, tc.wantData)
			}
		})
	}
	t.Run("answer with no call before it", func(t *testing.T) {
		h := answering(`{}`)
		res := mustRun(t, r, hostCallOf(t, `{"raw": {"fn": "answer", "cap": 8}}`, h))
		if res.Status != StatusOK || res.Output != "0 0" || len(h.got()) != 0 {
			t.Errorf("%+v, Host got %q; want 0, and nothing asked of the Host", res, h.got())
		}
	})
}

// A refusal reaches the guest helper as a *wit.Refusal with its text; a nil Host refuses both functions
// not-granted:, as wit.Functions{} does; with wit.Functions as the Host, a request that is not the
// function's object is refused bad-request:.
func TestHostCallRefusals(t *testing.T) {
	r := newRunner(t, Config{})
	notFound := wit.Functions{Pull: func(ctx context.Context, req wit.PullRequest) (json.RawMessage, error) {
		return nil, wit.Refuse("not-found", "no artifact "+req.Artifact)
	}}
	refusal := func(fn, req string) string {
		var a struct{ Error string }
		if err := json.Unmarshal(wit.Functions{}.Call(context.Background(), fn, []byte(req)), &a); err != nil || a.Error == "" {
			t.Fatalf("wit.Functions{} answers no refusal: %v", err)
		}
		return a.Error
	}
	for _, tc := range []struct {
		name, in   string
		host       Host
		wantOutput string
		want       string // the data's text
	}{
		{"a refusal", `{"pull": "local/x"}`, notFound, "refusal", "not-found: no artifact local/x"},
		{"a nil Host's pull", `{"pull": "local/x"}`, nil, "refusal", refusal(wit.FnManagePull, `{"artifact": "local/x"}`)},
		{"a nil Host's inference", `{"infer": {"messages": [{"role": "user", "text": "hi"}]}}`, nil, "refusal",
			refusal(wit.FnRunInference, `{"messages": [{"role": "user", "text": "hi"}]}`)},
		{"a bad request", `{"raw": {"fn": "manage_pull", "request": "not json", "cap": 4096}}`, notFound, "",
			`bad-request: the request is not {"artifact": "<scope>/<name>"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustRun(t, r, hostCallOf(t, tc.in, tc.host))
			var text string
			if err := json.Unmarshal(res.Data, &text); err != nil {
				t.Fatalf("%+v: %v", res, err)
			}
			if tc.wantOutput == "" { // raw: the whole answer
				var a struct{ Error string }
				if err := json.Unmarshal([]byte(text), &a); err != nil {
					t.Fatalf("the answer %q: %v", text, err)
				}
				text = a.Error
			}
			if res.Status != StatusOK || (tc.wantOutput != "" && res.Output != tc.wantOutput) || !strings.HasPrefix(text, tc.want) {
				t.Errorf("%+v; want output %q and the text %q", res, tc.wantOutput, tc.want)
			}
		})
	}
	if !strings.HasPrefix(refusal(wit.FnManagePull, `{"artifact": "x"}`), "not-granted: ") {
		t.Error("a nil Host's refusal is not not-granted:")
	}
}

type ctxKey struct{}

// The context a Host gets is the call's run context: the caller's (its values), with the call's time
// limit as its deadline.
func TestHostCallContext(t *testing.T) {
	r := newRunner(t, Config{})
	var got struct {
		value    any
		deadline time.Time
		ok       bool
	}
	h := &fakeHost{answer: func(ctx context.Context, fn string, req []byte) []byte {
		got.value = ctx.Value(ctxKey{})
		got.deadline, got.ok = ctx.Deadline()
		return []byte(`{}`)
	}}
	call := hostCallOf(t, `{"pull": "local/x"}`, h)
	call.Timeout = time.Hour
	start := time.Now()
	res, err := r.Run(context.WithValue(context.Background(), ctxKey{}, "the caller's"), call)
	if err != nil || res.Status != StatusOK || len(h.got()) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if got.value != "the caller's" {
		t.Errorf("the Host's context holds %v, not the caller's value", got.value)
	}
	if !got.ok || got.deadline.Before(start.Add(call.Timeout)) || got.deadline.After(time.Now().Add(call.Timeout)) {
		t.Errorf("the Host's context has the deadline %v (%v), want the call's time limit, an hour from its start", got.deadline, got.ok)
	}
}

// waitingHost is a Host that waits for its context to end, or for release, and says so on entered and
// with the context's cause.
type waitingHost struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	ignore  bool // wait for release only, ignoring the context
	cause   chan error
}

func newWaitingHost(ignore bool) *waitingHost {
	return &waitingHost{entered: make(chan struct{}), release: make(chan struct{}), ignore: ignore, cause: make(chan error, 1)}
}

func (w *waitingHost) Call(ctx context.Context, fn string, req []byte) []byte {
	close(w.entered) // once per test: a second call panics
	done := ctx.Done()
	if w.ignore {
		done = nil
	}
	select {
	case <-done:
		w.cause <- context.Cause(ctx)
	case <-w.release:
		w.cause <- nil
	}
	return []byte(`{"error": "failed: stopped"}`)
}

func (w *waitingHost) unblock() { w.once.Do(func() { close(w.release) }) }

// hostRunner is a Runner with its log, whose waiting Host is released and blocked module awaited when the
// test ends.
func hostRunner(t *testing.T, w *waitingHost) (*Runner, *lockedBuffer) {
	t.Helper()
	var log lockedBuffer
	r, err := New(Config{CacheDir: modules.cache, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.unblock()
		r.Close()
		<-r.freed
	})
	return r, &log
}

// A Host that waits on its context is ended by the call's time limit (a time stop), the caller's cancel
// (its cause) and Close (ErrClosed): the module ends then, with no answer to write, and Run answers without
// the watchdog's grace.
func TestHostCallStopped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		stop    func(r *Runner, cancel context.CancelFunc) // once the Host is entered
		check   func(t *testing.T, res Result, err, cause error)
	}{
		{"time limit", 2 * time.Second, nil, func(t *testing.T, res Result, err, cause error) {
			if err != nil || res.Stopped != StopTime || res.Failure != "The module was stopped by its time limit of 2s." {
				t.Errorf("%+v, %v; want a stop by the time limit", res, err)
			}
			if cause != errTimeLimit {
				t.Errorf("the Host's context ended by %v, want the time limit", cause)
			}
		}},
		{"cancel", 0, func(_ *Runner, cancel context.CancelFunc) { cancel() }, func(t *testing.T, res Result, err, cause error) {
			if !errors.Is(err, context.Canceled) || !errors.Is(cause, context.Canceled) {
				t.Errorf("%+v, %v (the Host's cause %v); want context.Canceled", res, err, cause)
			}
		}},
		{"close", 0, func(r *Runner, _ context.CancelFunc) { r.Close() }, func(t *testing.T, res Result, err, cause error) {
			if !errors.Is(err, ErrClosed) || !errors.Is(cause, ErrClosed) {
				t.Errorf("%+v, %v (the Host's cause %v); want ErrClosed", res, err, cause)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitingHost(false)
			r, log := hostRunner(t, w)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.stop != nil {
				go func() {
					select {
					case <-w.entered:
						tc.stop(r, cancel)
					case <-ctx.Done():
					}
				}()
			}
			call := hostCallOf(t, `{"pull": "local/x"}`, w)
			call.Timeout = tc.timeout
			res, err := runBounded(t, ctx, r, call, tc.timeout+stopGrace+slack, w.unblock)
			select {
			case <-w.entered:
			default:
				t.Fatalf("the module never called its Host: %+v, %v", res, err)
			}
			var cause error
			select {
			case cause = <-w.cause:
			case <-time.After(slack):
				t.Error("the Host's context never ended")
				w.unblock()
				cause = <-w.cause
			}
			tc.check(t, res, err, cause)
			if strings.Contains(log.String(), "past its stop") {
				t.Errorf("the watchdog gave up on a module whose Host returned at the stop:\n%s", log)
			}
		})
	}
}

// A Host that ignores its context and blocks does not hold Run past the stop's grace: Run answers as the
// time limit does, says so in the log, and the module is freed when the Host returns.
func TestHostCallIgnoringContext(t *testing.T) {
	w := newWaitingHost(true)
	r, log := hostRunner(t, w)
	call := hostCallOf(t, `{"pull": "local/x"}`, w)
	call.Timeout = time.Second
	start := time.Now()
	res, err := runBounded(t, context.Background(), r, call, call.Timeout+stopGrace+slack, w.unblock)
	took := time.Since(start)
	select {
	case <-w.entered:
	default:
		t.Fatalf("the module never called its Host: %+v, %v", res, err)
	}
	if err != nil || res.Stopped != StopTime {
		t.Errorf("%+v, %v; want a stop by the time limit", res, err)
	}
	if took < call.Timeout+stopGrace {
		t.Errorf("Run answered after %s, before the time limit and the grace: the Host was not waited for", took)
	}
	if !strings.Contains(log.String(), "blocked in a host call past its stop") {
		t.Errorf("the log does not say the call was given up on:\n%s", log)
	}
	w.unblock()
	r.modules.Wait()
	if !strings.Contains(log.String(), "has returned") {
		t.Errorf("the log does not say the blocked call returned:\n%s", log)
	}
}

// A span the module passes outside its memory traps it, saying which.
func TestHostCallOutOfMemory(t *testing.T) {
	r := newRunner(t, Config{})
	for _, tc := range []struct{ which, want string }{
		{"request", "murmur.manage_pull: the request at 4294967040, 23 bytes long, is outside the module's memory of "},
		{"answer", "murmur.manage_pull: the answer buffer at 4294967040, 4096 bytes long, is outside the module's memory of "},
	} {
		t.Run(tc.which, func(t *testing.T) {
			h := answering(`{}`)
			res := mustRun(t, r, hostCallOf(t, `{"oob": "`+tc.which+`"}`, h))
			if res.Status != StatusError || !strings.HasPrefix(res.Failure, "The module failed: ") || !strings.Contains(res.Failure, tc.want) {
				t.Errorf("%+v; want a failure %q…", res, tc.want)
			}
			if got := h.got(); len(got) != 0 {
				t.Errorf("the Host was asked %q", got)
			}
		})
	}
}

// Value types of a hand-made module.
const (
	i32 = 0x7f
	i64 = 0x7e
)

// importing is a minimal command module (a memory, a _start that does nothing) that also imports mod.name
// as a function of those parameter and result types.
func importing(mod, name string, params, results []byte) []byte {
	types := []byte{0x02, 0x60, byte(len(params))} // two types: the import's, then _start's () -> ()
	types = append(types, params...)
	types = append(types, byte(len(results)))
	types = append(types, results...)
	types = append(types, 0x60, 0x00, 0x00)
	imp := []byte{0x01, byte(len(mod))} // one import
	imp = append(imp, mod...)
	imp = append(imp, byte(len(name)))
	imp = append(imp, name...)
	imp = append(imp, 0x00, 0x00) // a function of type 0
	b := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	b = append(append(b, 0x01, byte(len(types))), types...) // the type section
	b = append(append(b, 0x02, byte(len(imp))), imp...)     // the import section
	return append(b,
		0x03, 0x02, 0x01, 0x01, // one function (index 1, after the import) of type 1
		0x05, 0x03, 0x01, 0x00, 0x01, // memory of 1 page
		0x07, 0x13, 0x02, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b) // its body: end
}

// HostImports lists the murmur functions a module imports: none for testdata/tool (level 1), all three for
// testdata/host; with and without a Runner. A murmur import of another name or signature is
// ErrInvalidModule from HostImports, Compile and Run, naming it and the three a module may import.
func TestHostImports(t *testing.T) {
	r := newRunner(t, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call Call
		want []string
	}{
		{"level 1", toolCall(t, map[string]any{}), nil},
		{"level 2", hostCallOf(t, `{}`, nil), []string{wit.FnAnswer, wit.FnManagePull, wit.FnRunInference}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.HostImports(ctx, tc.call)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Runner.HostImports: %q, %v; want %q", got, err, tc.want)
			}
			code, err := os.ReadFile(tc.call.Path)
			if err != nil {
				t.Fatal(err)
			}
			got, err = HostImports(ctx, code)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("HostImports: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"an unknown name", importing("murmur", "bogus", []byte{i32, i32}, []byte{i32}),
			"it imports murmur.bogus(i32, i32) -> i32; from murmur a module may import only " + hostList},
		{"a wrong signature", importing("murmur", "answer", nil, nil),
			"it imports murmur.answer(); from murmur a module may import only " + hostList},
		{"a wrong parameter type", importing("murmur", "manage_pull", []byte{i32, i32, i64, i32}, []byte{i32}),
			"it imports murmur.manage_pull(i32, i32, i64, i32) -> i32; from murmur"},
		{"another module", importing("env", "f", nil, nil),
			"it imports env.f; a tool module may import only wasi_snapshot_preview1, and at WIT level 2 " + hostList},
		{"not a module", []byte("\x00asm junk"), "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := HostImports(ctx, tc.code); !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("HostImports: %v; want ErrInvalidModule saying %q", err, tc.want)
			}
			file := filepath.Join(t.TempDir(), "m.wasm")
			if err := os.WriteFile(file, tc.code, 0o644); err != nil {
				t.Fatal(err)
			}
			call := Call{Name: "m", Path: file, Workdir: t.TempDir()}
			if _, err := r.HostImports(ctx, call); !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Runner.HostImports: %v; want ErrInvalidModule saying %q", err, tc.want)
			}
			if err := r.Compile(ctx, call); !errors.Is(err, ErrInvalidModule) {
				t.Errorf("Compile: %v; want ErrInvalidModule", err)
			}
			if _, err := r.Run(ctx, call); !errors.Is(err, ErrInvalidModule) {
				t.Errorf("Run: %v; want ErrInvalidModule", err)
			}
		})
	}
}

// The hand-made module with a murmur import of the right signature is one a Runner accepts and runs (it
// writes no result): what TestHostImports refuses is its import, nothing else.
func TestImportingIsRunnable(t *testing.T) {
	code := importing("murmur", "answer", []byte{i32, i32}, []byte{i32})
	got, err := HostImports(context.Background(), code)
	if err != nil || !slices.Equal(got, []string{wit.FnAnswer}) {
		t.Fatalf("%q, %v; want a valid module importing answer", got, err)
	}
	r := newRunner(t, Config{})
	res := mustRun(t, r, Call{Name: "m", Module: code, Workdir: t.TempDir()})
	if res.Status != StatusError || res.ExitCode != 0 || strings.HasPrefix(res.Failure, "The module failed") {
		t.Errorf("%+v; want a module that ran and wrote nothing", res)
	}
}

// The memory limit holds inside a host call: an answer longer than the module's memory limit lets it
// hold (48 MB against 32 MB) stops the module by that limit when it makes room for the answer, as any
// allocation past the limit does; the same answer's call runs within a limit it fits.
func TestHostCallAnswerOverMemoryLimit(t *testing.T) {
	r := newRunner(t, Config{})
	h := answering(`{"blob": "` + strings.Repeat("x", 48<<20) + `"}`)
	call := hostCallOf(t, `{"pull": "local/big"}`, h)
	call.MemoryMB = 32
	call.Timeout = 2 * time.Minute // without the memory limit, the time limit would stop it
	res := mustRun(t, r, call)
	if res.Stopped != StopMemory || res.Limit != "its memory limit of 32 MB" || res.Status != StatusError ||
		!strings.HasPrefix(res.Failure, "The module was stopped by its memory limit of 32 MB: it asked for ") {
		t.Errorf("%+v; want a stop by the memory limit", res)
	}
	if got := h.got(); len(got) != 1 || got[0] != `manage_pull {"artifact":"local/big"}` {
		t.Errorf("the Host got %.200q, want one manage_pull", got)
	}
	small := answering(`{"artifact": "local/big"}`)
	ok := hostCallOf(t, `{"pull": "local/big"}`, small)
	ok.MemoryMB = 32
	if res := mustRun(t, r, ok); res.Status != StatusOK || res.Output != "answer" {
		t.Errorf("a call whose answer fits: %+v", res)
	}
}
