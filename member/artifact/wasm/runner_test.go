package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAnswer(t *testing.T) {
	r := newRunner(t, Config{})
	for _, tc := range []struct {
		name  string
		in    map[string]any
		limit int
		want  Result
	}{
		{"ok with data", map[string]any{"op": "sum", "numbers": []int{1, 2, 3}}, 0,
			Result{Status: StatusOK, Output: "6", OutputBytes: 1, Data: json.RawMessage(`{"count":3,"sum":6}`)}},
		{"the module's own error", map[string]any{"op": "refuse"}, 0,
			Result{Status: StatusError, Output: "the tool says no", OutputBytes: 16}},
		{"output cut to its last bytes", map[string]any{"op": "echo", "text": "0123456789", "n": 10}, 25,
			Result{Status: StatusOK, Output: "5678901234567890123456789", OutputBytes: 100}},
		{"cut at a character boundary", map[string]any{"op": "echo", "text": "aé", "n": 3}, 4,
			Result{Status: StatusOK, Output: "aé", OutputBytes: 9}},
		{"a result decides whatever the exit code", map[string]any{"op": "exit-after-answer"}, 0,
			Result{Status: StatusError, Output: "answered, then exited 1", OutputBytes: 23, ExitCode: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := toolCall(t, tc.in)
			call.OutputLimit = tc.limit
			got := mustRun(t, r, call)
			got.Cold = false
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// A module that does not answer gets a failure saying what it did wrong, with its stderr.
func TestNotAResult(t *testing.T) {
	r := newRunner(t, Config{ResultLimit: 64 << 10})
	for _, tc := range []struct {
		op   string
		want []string // in the failure, in this order
		exit uint32
	}{
		{"junk", []string{"The module did not write a result on stdout: it is not JSON (invalid character 'h' looking for beginning of value). A tool writes one JSON object " + resultShape + " on stdout and nothing else. Its stdout (all):\nhello, this is not JSON\n"}, 0},
		{"shape", []string{`The module did not write a result on stdout: its "status" is "maybe"; it must be "ok" or "error".`}, 0},
		{"two", []string{"The module did not write a result on stdout: more follows the first JSON value."}, 0},
		{"silent", []string{"The module wrote nothing on stdout; a tool writes one JSON object " + resultShape + " there."}, 0},
		{"exit", []string{"The module exited with code 3 without writing a result.\nIts stderr (all):\nsomething broke\n"}, 3},
		{"panic", []string{"The module exited with code 2 without writing a result.", "Its stderr (", "panic: the tool panicked"}, 2},
		{"flood", []string{"The module wrote 1048576 bytes on stdout, more than the 65536 bytes a result may have."}, 0},
	} {
		t.Run(tc.op, func(t *testing.T) {
			got := mustRun(t, r, toolCall(t, map[string]any{"op": tc.op, "n": 1}))
			if got.Status != StatusError || got.Stopped != StopNone || got.ExitCode != tc.exit || got.Output != "" || got.Data != nil {
				t.Errorf("got status %q, stopped %q, exit %d, output %q, data %s; want an error, no limit, exit %d",
					got.Status, got.Stopped, got.ExitCode, got.Output, got.Data, tc.exit)
			}
			rest := got.Failure
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("failure lacks %q:\n%s", w, got.Failure)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestParseResult(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"status": "ok", "output": 3}`, `its "output" is a JSON number, not a string`},
		{`{"status": "ok", "stauts": "ok"}`, `it is not of that shape (json: unknown field "stauts")`},
		{`{"output": "x"}`, `it has no "status"`},
		{`["ok"]`, "it is JSON but not an object"},
		{`{"status": "ok"} trailing`, "more follows the first JSON value"},
	} {
		_, err := parseResult([]byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("parseResult(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
	got, err := parseResult([]byte(`{"status": "error", "data": null}` + "\n"))
	if err != nil || got.status != StatusError || got.data != nil {
		t.Errorf("a null data: %+v, %v", got, err)
	}
}

// What a module sees: its name alone as argv, no environment, "/" as its directory, the host's clock
// and real randomness.
func TestEnvironment(t *testing.T) {
	r := newRunner(t, Config{})
	type env struct {
		Args   []string `json:"args"`
		Env    []string `json:"env"`
		Cwd    string   `json:"cwd"`
		Year   int      `json:"year"`
		Random string   `json:"random"`
	}
	var seen []string
	for range 2 {
		res := mustRun(t, r, toolCall(t, map[string]any{"op": "env"}))
		var got env
		if err := json.Unmarshal(res.Data, &got); err != nil {
			t.Fatalf("%v: %s", err, res.Data)
		}
		want := env{Args: []string{"tool"}, Env: []string{}, Cwd: "/", Year: time.Now().Year(), Random: got.Random}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("environment (-want +got):\n%s", diff)
		}
		seen = append(seen, got.Random)
	}
	if seen[0] == seen[1] {
		t.Errorf("two calls drew the same random bytes %s: the source is not random", seen[0])
	}
}

func TestWorkdirWrite(t *testing.T) {
	r := newRunner(t, Config{})
	call := toolCall(t, map[string]any{"op": "write", "path": "notes/out.txt", "text": "written by the module", "mkdir": true})
	if res := mustRun(t, r, call); res.Status != StatusOK {
		t.Fatalf("write: %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(call.Workdir, "notes", "out.txt"))
	if err != nil || string(b) != "written by the module" {
		t.Fatalf("the file in the workdir: %q, %v", b, err)
	}
	// Absolute paths name the workdir too, and a directory lists.
	for in, want := range map[string]string{
		`{"op": "read", "path": "/notes/out.txt"}`: "written by the module",
		`{"op": "list", "path": "/"}`:              "notes",
		`{"op": "list", "path": "notes"}`:          "out.txt",
	} {
		c := call
		c.Input = []byte(in)
		if res := mustRun(t, r, c); res.Status != StatusOK || res.Output != want {
			t.Errorf("%s: %+v, want output %q", in, res, want)
		}
	}
}

// Every file operation of Go's os on wasip1 works in the workdir.
func TestWorkdirFileOperations(t *testing.T) {
	r := newRunner(t, Config{})
	call := toolCall(t, map[string]any{"op": "fsops"})
	if res := mustRun(t, r, call); res.Status != StatusOK {
		t.Fatalf("%+v", res)
	}
	assertOnly(t, call.Workdir, "e", "e/f", "e/f/kept")
}

// The workdir is the module's whole filesystem: host paths name files in it, ".." stops at its top, and
// the host's path_open refuses a path with "..".
func TestWorkdirIsTheWholeFilesystem(t *testing.T) {
	r := newRunner(t, Config{})
	parent := t.TempDir()
	work := filepath.Join(parent, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(in map[string]any) Result {
		c := toolCall(t, in)
		c.Workdir = work
		return mustRun(t, r, c)
	}
	if res := run(map[string]any{"op": "read", "path": "/etc/passwd"}); res.Output != "open /etc/passwd: No such file or directory" {
		t.Errorf("reading /etc/passwd: %+v", res)
	}
	if res := run(map[string]any{"op": "write", "path": "../x", "text": "x"}); res.Status != StatusOK {
		t.Errorf("writing ../x: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(work, "x")); err != nil {
		t.Errorf("../x from / is the workdir's x: %v", err)
	}
	if res := run(map[string]any{"op": "rawopen", "path": "../raw"}); res.Status != StatusError || res.Output != `path_open "../raw": errno 63` {
		t.Errorf("path_open of ../raw: %+v, want EPERM (63)", res)
	}
	assertOnly(t, parent, "work", "work/x")
}

// assertOnly fails unless dir holds exactly the paths given (relative, slash-separated).
func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	var got []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s holds (-want +got):\n%s", dir, diff)
	}
}

// A symbolic link leads nowhere outside the workdir, whether the module made it or the host did; links
// inside it work.
func TestWorkdirSymlinkCannotLeadOut(t *testing.T) {
	r := newRunner(t, Config{})
	parent := t.TempDir()
	work, outside := filepath.Join(parent, "work"), filepath.Join(parent, "outside")
	for _, d := range []string{filepath.Join(work, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "abs")); err != nil { // made by the host: absolute
		t.Fatal(err)
	}
	run := func(in map[string]any) Result {
		c := toolCall(t, in)
		c.Workdir = work
		return mustRun(t, r, c)
	}
	if res := run(map[string]any{"op": "symlink", "target": "../outside", "path": "esc"}); res.Status != StatusOK {
		t.Fatalf("making a link: %+v", res) // making one is allowed; following it out is not
	}
	for _, in := range []map[string]any{
		{"op": "write", "path": "esc/pwned", "text": "x"},
		{"op": "write", "path": "abs/pwned", "text": "x"},
		{"op": "read", "path": "esc/secret"},
		{"op": "read", "path": "abs/secret"},
		{"op": "list", "path": "esc"},
		{"op": "rawopen", "path": "esc/raw"},
	} {
		if res := run(in); res.Status != StatusError || !strings.Contains(res.Output, "not permitted") && !strings.Contains(res.Output, "errno 63") {
			t.Errorf("%v: %+v, want operation not permitted", in, res)
		}
	}
	if res := run(map[string]any{"op": "symlink", "target": "sub", "path": "in"}); res.Status != StatusOK {
		t.Fatalf("making a link inside: %+v", res)
	}
	if res := run(map[string]any{"op": "write", "path": "in/f", "text": "through a link inside"}); res.Status != StatusOK {
		t.Errorf("writing through a link inside: %+v", res)
	}
	assertOnly(t, parent, "outside", "outside/secret", "work", "work/abs", "work/esc", "work/in", "work/sub", "work/sub/f")
}

func TestTimeLimit(t *testing.T) {
	r := newRunner(t, Config{})
	for _, op := range []string{"loop", "sleep"} {
		t.Run(op, func(t *testing.T) {
			call := toolCall(t, map[string]any{"op": op})
			call.Timeout = 500 * time.Millisecond
			res := mustRun(t, r, call)
			if res.Stopped != StopTime || res.Limit != "its time limit of 500ms" || res.Status != StatusError ||
				res.Failure != "The module was stopped by its time limit of 500ms." {
				t.Errorf("%+v", res)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	r := newRunner(t, Config{})
	call := toolCall(t, map[string]any{"op": "hog", "n": 4})
	call.MemoryMB = 64
	call.Timeout = 2 * time.Minute // without the memory limit, the time limit would stop it
	res := mustRun(t, r, call)
	if res.Stopped != StopMemory || res.Limit != "its memory limit of 64 MB" || res.Status != StatusError ||
		!strings.HasPrefix(res.Failure, "The module was stopped by its memory limit of 64 MB: it asked for ") ||
		!strings.Contains(res.Failure, "out of memory") {
		t.Errorf("%+v", res)
	}
	// The same module runs within a limit it fits.
	ok := toolCall(t, map[string]any{"op": "sum"})
	ok.MemoryMB = 64
	if res := mustRun(t, r, ok); res.Status != StatusOK {
		t.Errorf("a call within the limit: %+v", res)
	}
	// A module whose initial memory is over the limit is not started.
	ok.MemoryMB = 1
	res = mustRun(t, r, ok)
	if res.Stopped != StopMemory || !strings.HasPrefix(res.Failure, "The module needs 3 MB of memory to start, more than its memory limit of 1 MB.") {
		t.Errorf("initial memory over the limit: %+v", res)
	}
}

// A truncated module, one importing what WASI does not give, and one without _start are refused with
// ErrInvalidModule and nothing cached; a wrong digest is ErrDigest.
func TestInvalidModule(t *testing.T) {
	path, digest := toolModule(t)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, Config{})
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"truncated", whole[:len(whole)/2], "EOF"},
		{"imports env", wasmImportsEnv, "it imports env.f; a tool module may import only wasi_snapshot_preview1"},
		{"no _start", wasmNoStart, "it exports no _start function"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tool.wasm")
			if err := os.WriteFile(file, tc.code, 0o644); err != nil {
				t.Fatal(err)
			}
			call := Call{Name: "broken", Path: file, Input: []byte(`{}`), Workdir: t.TempDir()}
			_, err := r.Run(context.Background(), call)
			if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), tc.want) ||
				!strings.HasPrefix(err.Error(), "wasm tool broken: not a runnable WASI command module: ") {
				t.Errorf("err = %v, want ErrInvalidModule mentioning %q", err, tc.want)
			}
		})
	}
	r.mu.Lock()
	if len(r.mods) != 0 {
		t.Errorf("%d modules cached after failed compilations", len(r.mods))
	}
	r.mu.Unlock()

	call := toolCall(t, map[string]any{"op": "sum"})
	call.Digest = "sha256:" + strings.Repeat("0", 64)
	if _, err := r.Run(context.Background(), call); !errors.Is(err, ErrDigest) ||
		!strings.Contains(err.Error(), "the call names sha256:000") || !strings.Contains(err.Error(), "the module's bytes are "+digest) {
		t.Errorf("a wrong digest: %v", err)
	}
}

// Hand-assembled modules: a _start that imports env.f, and a module exporting only its memory.
var (
	wasmImportsEnv = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type () -> ()
		0x02, 0x09, 0x01, 0x03, 'e', 'n', 'v', 0x01, 'f', 0x00, 0x00, // import env.f
		0x03, 0x02, 0x01, 0x00, // one function
		0x05, 0x03, 0x01, 0x00, 0x01, // memory of 1 page
		0x07, 0x13, 0x02, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}
	wasmNoStart = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01,
		0x07, 0x0a, 0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00}
)

// A second call of a digest uses the compiled module in memory; a new Runner on the same cache directory
// loads it from there and writes nothing new (a compilation would rename a new entry into place). The
// directory is the one the other tests share: a compilation under the race detector takes half a minute.
func TestCompiledModuleCache(t *testing.T) {
	dir := modules.cache
	r := newRunner(t, Config{CacheDir: dir})
	in := map[string]any{"op": "sum", "numbers": []int{2, 3}}
	if res := mustRun(t, r, toolCall(t, in)); !res.Cold || res.Status != StatusOK {
		t.Fatalf("first call: %+v, want a cold ok", res)
	}
	if res := mustRun(t, r, toolCall(t, in)); res.Cold || res.Status != StatusOK {
		t.Fatalf("second call: %+v, want a warm ok", res)
	}
	before := cacheFiles(t, dir)
	if len(before) == 0 {
		t.Fatal("nothing in the compilation cache after a compilation")
	}
	r2 := newRunner(t, Config{CacheDir: dir})
	if res := mustRun(t, r2, toolCall(t, in)); !res.Cold || res.Status != StatusOK {
		t.Fatalf("a new runner's first call: %+v", res)
	}
	if diff := cmp.Diff(before, cacheFiles(t, dir)); diff != "" {
		t.Errorf("the cache directory changed on a compilation it had (-before +after):\n%s", diff)
	}
}

// Compile refuses a module that cannot run, and makes the first call of one that can warm.
func TestCompile(t *testing.T) {
	r := newRunner(t, Config{})
	file := filepath.Join(t.TempDir(), "tool.wasm")
	if err := os.WriteFile(file, wasmNoStart, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.Compile(context.Background(), Call{Name: "broken", Path: file}); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("compiling a module without _start: %v", err)
	}
	call := toolCall(t, map[string]any{"op": "sum", "numbers": []int{4}})
	if err := r.Compile(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if res := mustRun(t, r, call); res.Cold || res.Output != "4" {
		t.Errorf("the first call after Compile: %+v, want a warm ok", res)
	}
}

// cacheFiles lists a cache directory's files with their sizes and modification times.
func cacheFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			files[p] = fi.ModTime().String() + " " + fi.Mode().String()
		}
		return nil
	})
	return files
}

// Two calls of one module at once, on a Runner that has not compiled it: one compiles, the other waits
// for that compilation; each has its own instance.
func TestConcurrentCalls(t *testing.T) {
	r := newRunner(t, Config{})
	var wg sync.WaitGroup
	results := make([]Result, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Go(func() {
			call := toolCall(t, map[string]any{"op": "sum", "numbers": []int{i, 10}})
			results[i], errs[i] = r.Run(context.Background(), call)
		})
	}
	wg.Wait()
	cold := 0
	for i, res := range results {
		if errs[i] != nil || res.Status != StatusOK || res.Output != []string{"10", "11", "12", "13"}[i] {
			t.Errorf("call %d: %+v, %v", i, res, errs[i])
		}
		if res.Cold {
			cold++
		}
	}
	if cold != 1 {
		t.Errorf("%d calls compiled, want 1", cold)
	}
}

// The caller's context ending and Close each stop a call in flight, which returns their cause.
func TestStoppedCalls(t *testing.T) {
	r := newRunner(t, Config{})
	looping := func(ctx context.Context, r *Runner) (chan error, string) {
		call := toolCall(t, map[string]any{"op": "loop"})
		done := make(chan error, 1)
		go func() {
			_, err := r.Run(ctx, call)
			done <- err
		}()
		return done, call.Workdir
	}
	waitFor := func(path string) {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				return
			}
		}
		t.Fatalf("the module never wrote %s", path)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done, work := looping(ctx, r)
	waitFor(filepath.Join(work, "looping"))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v, want context.Canceled", err)
	}

	r2, err := New(Config{CacheDir: modules.cache})
	if err != nil {
		t.Fatal(err)
	}
	done, work = looping(context.Background(), r2)
	waitFor(filepath.Join(work, "looping"))
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("a call in flight at Close: %v, want ErrClosed", err)
	}
	if _, err := r2.Run(context.Background(), toolCall(t, map[string]any{"op": "sum"})); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: %v, want ErrClosed", err)
	}
}
