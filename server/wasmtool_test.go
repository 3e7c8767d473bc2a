package server

import (
	"context"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/store"
)

// wasmToolLimit is the time limit staging gives a WebAssembly tool's call (staged's wasmTimeout).
const wasmToolLimit = 30 * time.Second

// probeTool is the wasm package's test module (its input's "op": "read" a path, "loop" forever, …),
// built for wasip1 once per test binary and compiled into a cache the sessions share: a compilation takes
// a minute under -race, loading it from the cache a moment.
var probeTool struct {
	once  sync.Once
	wasm  []byte
	cache string
	err   error
}

func probeModule(t *testing.T) (module []byte, cache string) {
	t.Helper()
	probeTool.once.Do(func() {
		out := filepath.Join(harnessDir, "probe.wasm")
		cmd := exec.Command("go", "build", "-o", out, "../member/artifact/wasm/testdata/tool")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			probeTool.err = fmt.Errorf("building the wasm test module for wasip1: %v\n%s", err, b)
			return
		}
		if probeTool.wasm, probeTool.err = os.ReadFile(out); probeTool.err != nil {
			return
		}
		probeTool.cache = filepath.Join(harnessDir, "wasm-cache")
		r, err := wasm.New(wasm.Config{CacheDir: probeTool.cache})
		if err != nil {
			probeTool.err = err
			return
		}
		defer r.Close()
		probeTool.err = r.Compile(context.Background(), wasm.Call{Name: "probe", Module: probeTool.wasm})
	})
	if probeTool.err != nil {
		t.Fatal(probeTool.err)
	}
	return probeTool.wasm, probeTool.cache
}

// probeScript is the model: "read <path>" has the tool read a file and says what it answered; "wedge"
// reads the FIFO "pipe", then loops in the tool until stopped; anything else is answered at once.
const probeScript = `rules:
  - match: '^read (?P<p>.+)$'
    turns:
      - call: [{tool: probe, input: {op: read, path: '{{.p}}'}}]
      - say: '{{(index .results 0).status}}: {{(index .results 0).output}}'
  - match: '^wedge$'
    turns:
      - call: [{tool: probe, input: {op: read, path: pipe}}]
      - call: [{tool: probe, input: {op: loop}}]
      - say: the loop ended
  - match: ''
    turns: [{say: hello}]
`

// startProbeDoor is a door whose member is an agent on the script driver with the WebAssembly tool probe
// declared in murmur.yaml, staged from its project store, and a FIFO "pipe" in its workdir that nothing
// ever writes to. It returns the fixture and the workdir.
func startProbeDoor(t *testing.T) (*fixture, string) {
	t.Helper()
	module, cache := probeModule(t)
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	files := map[string]string{
		"murmur.yaml": "name: prober\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ntools: [local/probe]\n",
		"script.yaml": probeScript,
		".murmur/store/local/probe/1.0.0/murmur.yaml": "name: local/probe\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\nmodule: tool.wasm\n" +
			"description: reads files\ninput_schema:\n  type: object\n  properties: {op: {type: string}, path: {type: string}}\n",
		".murmur/store/local/probe/1.0.0/tool.wasm": string(module),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := capsule.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(root, "data", "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	reg, wrapped := NewRegistry("solo")
	series, err := metrics.New(wrapped)
	if err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(root, "global-store")
	work := filepath.Join(root, "work")
	srv := httptest.NewUnstartedServer(nil) // on loopback
	url := "http://" + srv.Listener.Addr().String()
	sess, err := member.Start(member.Config{
		Member: "solo", Formation: "test", Capsule: c, Store: st, Metrics: series, DoorURL: url,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: work, WasmCacheDir: cache,
		Getenv: func(k string) string {
			if k == "MUR_STORE_DIR" {
				return global
			}
			return ""
		},
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, url: url, session: sess, store: st, srv: srv}
	door, err := NewDoor(DoorConfig{
		Member: "solo", Roster: testRoster(t, root), Executor: sess,
		Tokens:  Tokens{Operator: testOperatorToken, Formation: testFormationToken},
		Card:    NewCard("solo", c.Description, "test", url, "test"),
		MaxBody: 64 << 10, Gatherer: reg, Registerer: wrapped, AnswersMessage: c.AnswersWithMessage(),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.door = door
	srv.Config.Handler = door
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sess.Close(ctx); err != nil {
			t.Errorf("session close: %v", err)
		}
		srv.Close()
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	if err := syscall.Mkfifo(filepath.Join(work, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Before the session closes: a tool call wedged on the FIFO (as it was before FIFOs were refused)
	// would keep Close waiting forever.
	t.Cleanup(func() { unwedgeFIFOs(work) })
	return f, work
}

// unwedgeFIFOs opens every FIFO in dir for reading and writing at once, which completes an open(2)
// waiting at either end, and closes it, so a read there ends.
func unwedgeFIFOs(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeNamedPipe != 0 {
			if f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
		return nil
	})
}

// waitEnded polls GetTask until the task is terminal, for at most limit, and fails the test otherwise.
func waitEnded(t *testing.T, f *fixture, id a2ago.TaskID, limit time.Duration) *a2ago.Task {
	t.Helper()
	c := f.client(testOperatorToken)
	deadline := time.Now().Add(limit)
	for {
		task, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("GetTask %s: %v", id, err)
		}
		if task.Status.State.Terminal() {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is still %s %s after it was sent, past its tool's time limit of %s: the member is wedged",
				id, task.Status.State, limit, wasmToolLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A model's call of a WebAssembly tool that reads a FIFO in the workdir does not wedge the member: the
// tool is refused the FIFO at once, the task ends (well within its tool's time limit) with the tool's
// error in its answer, and the member takes the next task.
func TestWasmToolReadingAFIFOEndsItsTask(t *testing.T) {
	f, _ := startProbeDoor(t)
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "read pipe", true)
	ended := waitEnded(t, f, task.ID, wasmToolLimit+slack)
	if ended.Status.State != a2ago.TaskStateCompleted || responseText(ended) != "error: open pipe: Not supported" {
		t.Errorf("task %s %q, answer %q; want completed with the tool's refusal", ended.Status.State, statusText(ended), responseText(ended))
	}
	next := sendTask(t, c, "hi", false)
	if next.Status.State != a2ago.TaskStateCompleted || responseText(next) != "hello" {
		t.Errorf("the next task: %s %q %q, want it run and answered", next.Status.State, statusText(next), responseText(next))
	}
}

// CancelTask of a task whose model called a WebAssembly tool on a FIFO (and then one that loops) answers
// at once and the task ends canceled; the member takes the next task.
func TestCancelTaskOfAWasmToolCallAnswers(t *testing.T) {
	f, work := startProbeDoor(t)
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "wedge", true)
	// The looping call writes "looping" in the workdir: the FIFO's call is behind it.
	for deadline := time.Now().Add(wasmToolLimit); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(work, "looping")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the tool call on the FIFO never ended: the task is wedged in it")
			break
		}
	}
	// One second, and slack for a loaded machine: a cancel that waits on a wedged call never answers.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second+cancelSlack)
	defer cancel()
	got, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if got.Status.State != a2ago.TaskStateCanceled {
		t.Errorf("CancelTask answered %s %q, want canceled", got.Status.State, statusText(got))
	}
	next := sendTask(t, c, "hi", false)
	if next.Status.State != a2ago.TaskStateCompleted || responseText(next) != "hello" {
		t.Errorf("the next task: %s %q %q, want it run and answered", next.Status.State, statusText(next), responseText(next))
	}
}

// slack is what a bound of these tests allows beyond itself on a loaded machine; cancelSlack is a cancel's.
const (
	slack       = 15 * time.Second
	cancelSlack = 4 * time.Second
)
