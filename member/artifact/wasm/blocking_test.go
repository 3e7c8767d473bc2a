package wasm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// slack is how much longer than its bound a test lets a call take before it calls it wedged: the bound is
// what is tested, the slack is for a loaded machine.
const slack = 20 * time.Second

// runBounded runs call and fails the test when it has not returned within bound: then it calls release,
// which lets the call end, and waits for it. The module is compiled first, outside the bound: what is
// bounded is the run, and a compilation under the race detector on a loaded machine can take longer than
// the bound (CI once took 37 s for the first compilation in this binary).
func runBounded(t *testing.T, ctx context.Context, r *Runner, call Call, bound time.Duration, release func()) (Result, error) {
	t.Helper()
	if err := r.Compile(context.Background(), call); err != nil {
		t.Fatalf("compiling %s: %v", call.Name, err)
	}
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(ctx, call)
		done <- ran{res, err}
	}()
	select {
	case got := <-done:
		return got.res, got.err
	case <-time.After(bound):
	}
	t.Errorf("the call was still running %s after it started: it is wedged", bound)
	release()
	got := <-done
	return got.res, got.err
}

// unwedge opens every FIFO in dir for reading and writing at once, which completes an open(2) waiting at
// either end of it, and closes it, so a read then sees the end of the file.
func unwedge(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeNamedPipe != 0 {
			if f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
		return nil
	})
}

// mkfifo makes a FIFO at path; nothing ever writes to it.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A module may open only regular files and directories: a FIFO (which it could wait on forever, beyond
// wazero's reach), a unix socket, or a link to either is refused at once with ENOTSUP, whether it reads
// or writes, and a directory's rewind that finds a FIFO in its place fails too (EBADF: the descriptor is
// no directory now, as WASI's fd_readdir says it). The run ends with the module's own answer, not at its
// time limit.
func TestSpecialFilesAreRefused(t *testing.T) {
	r := newRunner(t, Config{})
	work := t.TempDir()
	mkfifo(t, filepath.Join(work, "pipe"))
	if err := os.Symlink("pipe", filepath.Join(work, "to-pipe")); err != nil {
		t.Fatal(err)
	}
	// A socket's path must fit in 108 bytes: it is made in a short directory and moved in.
	short, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	l, err := net.Listen("unix", filepath.Join(short, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Rename(filepath.Join(short, "sock"), filepath.Join(work, "sock")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sock", filepath.Join(work, "to-sock")); err != nil {
		t.Fatal(err)
	}
	const timeout = 10 * time.Second
	for _, tc := range []struct {
		name string
		in   map[string]any
		want string // the module's output
		prep func(t *testing.T, work string)
	}{
		{"read a FIFO", map[string]any{"op": "read", "path": "pipe"}, "open pipe: Not supported", nil},
		{"read a link to a FIFO", map[string]any{"op": "read", "path": "to-pipe"}, "open to-pipe: Not supported", nil},
		{"write a FIFO", map[string]any{"op": "write", "path": "/pipe", "text": "x"}, "open /pipe: Not supported", nil},
		{"read a unix socket", map[string]any{"op": "read", "path": "sock"}, "open sock: Not supported", nil},
		{"read a link to a unix socket", map[string]any{"op": "read", "path": "to-sock"}, "open to-sock: Not supported", nil},
		{"rewind a directory replaced by a FIFO", map[string]any{"op": "rewind", "path": "d", "target": "p"}, "readdirent d: Bad file number",
			func(t *testing.T, work string) {
				if err := os.Mkdir(filepath.Join(work, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				mkfifo(t, filepath.Join(work, "p"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := toolCall(t, tc.in)
			call.Workdir, call.Timeout = work, timeout
			if tc.prep != nil {
				call.Workdir = t.TempDir()
				tc.prep(t, call.Workdir)
			}
			res, err := runBounded(t, context.Background(), r, call, timeout+stopGrace+slack, func() { unwedge(call.Workdir) })
			if err != nil || res.Status != StatusError || res.Stopped != StopNone || res.Output != tc.want {
				t.Errorf("%+v, %v; want the module's error %q, not a stop", res, err, tc.want)
			}
		})
	}
	// Stat says what each is, without waiting on it.
	call := toolCall(t, map[string]any{"op": "list", "path": "/"})
	call.Workdir = work
	if res := mustRun(t, r, call); res.Status != StatusOK || res.Output != "pipe,sock,to-pipe,to-sock" {
		t.Errorf("listing the workdir: %+v", res)
	}
}

// blockingFS is the workdir's filesystem with one name, "block", whose open waits until release is
// closed, whatever the call's context does: a host call wazero cannot interrupt, as a read of a FIFO was
// and a read of a hung network filesystem is.
type blockingFS struct {
	experimentalsys.FS
	entered chan struct{} // closed once a module opens "block"
	release chan struct{}
	once    sync.Once
}

func (b *blockingFS) OpenFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if strings.TrimLeft(name, "/") == "block" {
		b.once.Do(func() { close(b.entered) })
		<-b.release
		return nil, experimentalsys.EIO
	}
	return b.FS.OpenFile(name, flag, perm)
}

// blockingRunner is a Runner whose modules see blockingFS, and what its log says; the block is released
// and its module awaited when the test ends.
func blockingRunner(t *testing.T) (*Runner, *blockingFS, *lockedBuffer) {
	t.Helper()
	var log lockedBuffer
	r, err := New(Config{CacheDir: modules.cache, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b := &blockingFS{entered: make(chan struct{}), release: make(chan struct{})}
	r.workdirFS = func(root *os.Root) experimentalsys.FS {
		b.FS = &rootFS{root: root}
		return b
	}
	t.Cleanup(func() {
		b.unblock()
		r.Close()
		<-r.freed
	})
	return r, b, &log
}

func (b *blockingFS) unblock() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A module blocked in a host call past its time limit does not hold Run: Run answers as the time limit
// does once the grace is over, the Runner takes other calls meanwhile, and the blocked call's module is
// freed when its host call returns. The log says both.
func TestWatchdogTimeLimit(t *testing.T) {
	r, b, log := blockingRunner(t)
	call := toolCall(t, map[string]any{"op": "read", "path": "block"})
	call.Timeout = 2 * time.Second
	res, err := runBounded(t, context.Background(), r, call, call.Timeout+stopGrace+slack, b.unblock)
	select {
	case <-b.entered:
	default:
		t.Fatalf("the module never reached the blocking open: %+v, %v", res, err)
	}
	if err != nil || res.Stopped != StopTime || res.Failure != "The module was stopped by its time limit of 2s." {
		t.Errorf("%+v, %v; want a stop by the time limit", res, err)
	}
	if got := mustRun(t, r, toolCall(t, map[string]any{"op": "sum", "numbers": []int{1, 2}})); got.Output != "3" {
		t.Errorf("a call beside the blocked one: %+v", got)
	}
	if !strings.Contains(log.String(), "blocked in a host call past its stop") || !strings.Contains(log.String(), "stopped_by=\"the call's time limit\"") {
		t.Errorf("the log does not say the call was given up on:\n%s", log)
	}
	b.unblock()
	r.modules.Wait()
	if !strings.Contains(log.String(), "has returned") {
		t.Errorf("the log does not say the blocked call returned:\n%s", log)
	}
}

// The caller's cancel ends a blocked call's Run with the cancel's cause; Close ends it with ErrClosed, and
// Close itself returns within its bound, leaving the runtime to be freed when the call returns.
func TestWatchdogCancelAndClose(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		r, b, _ := blockingRunner(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-b.entered:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := runBounded(t, ctx, r, toolCall(t, map[string]any{"op": "read", "path": "block"}), stopGrace+slack, b.unblock)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled blocked call: %v, want context.Canceled", err)
		}
	})
	t.Run("close", func(t *testing.T) {
		r, b, log := blockingRunner(t)
		r.closeWait = 200 * time.Millisecond
		closed := make(chan error, 1)
		quit := make(chan struct{})
		defer close(quit)
		go func() {
			select {
			case <-b.entered:
				closed <- r.Close()
			case <-quit:
			}
		}()
		_, err := runBounded(t, context.Background(), r, toolCall(t, map[string]any{"op": "read", "path": "block"}), stopGrace+slack, b.unblock)
		if !errors.Is(err, ErrClosed) {
			t.Errorf("a blocked call at Close: %v, want ErrClosed", err)
		}
		select {
		case err := <-closed:
			if !errors.Is(err, errStuck) {
				t.Errorf("Close with a call still blocked: %v, want errStuck", err)
			}
		case <-time.After(r.closeWait + slack):
			t.Fatal("Close waits on a call blocked in a host call")
		}
		select {
		case <-r.freed:
			t.Error("the runtime was freed under a module still blocked in a host call")
		default:
		}
		b.unblock()
		<-r.freed
		if !strings.Contains(log.String(), "freed when they return") {
			t.Errorf("the log does not say Close left the runtime to the blocked call:\n%s", log)
		}
	})
}
