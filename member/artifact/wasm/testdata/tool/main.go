// Command tool is the test module of package wasm, built with GOOS=wasip1 GOARCH=wasm by the tests. Its
// input's "op" picks what it does: answer well, misbehave, or probe what it can reach.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unsafe"
)

type input struct {
	Op      string    `json:"op"`
	Numbers []float64 `json:"numbers"`
	Path    string    `json:"path"`
	Target  string    `json:"target"`
	Text    string    `json:"text"`
	N       int       `json:"n"`
	Mkdir   bool      `json:"mkdir"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		answer("error", "reading stdin: "+err.Error(), nil)
		return
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		answer("error", "bad input: "+err.Error(), nil)
		return
	}
	switch in.Op {
	case "sum":
		var sum float64
		for _, n := range in.Numbers {
			sum += n
		}
		answer("ok", fmt.Sprint(sum), map[string]any{"sum": sum, "count": len(in.Numbers)})
	case "echo": // the text, repeated n times (at least once)
		answer("ok", strings.Repeat(in.Text, max(in.N, 1)), nil)
	case "refuse":
		answer("error", "the tool says no", nil)
	case "write": // with mkdir, its directory too
		if dir := in.Path[:max(strings.LastIndex(in.Path, "/"), 0)]; in.Mkdir && dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				answer("error", err.Error(), nil)
				return
			}
		}
		status(os.WriteFile(in.Path, []byte(in.Text), 0o644))
	case "read":
		b, err := os.ReadFile(in.Path)
		if err != nil {
			status(err)
			return
		}
		answer("ok", string(b), nil)
	case "list":
		des, err := os.ReadDir(in.Path)
		if err != nil {
			status(err)
			return
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		answer("ok", strings.Join(names, ","), nil)
	case "rewind": // lists the directory path, moves it away, puts target in its place, lists path again from the start
		status(rewind(in.Path, in.Target))
	case "fsops":
		if err := fsops(); err != nil {
			answer("error", err.Error(), nil)
			return
		}
		answer("ok", "done", nil)
	case "symlink":
		status(os.Symlink(in.Target, in.Path))
	case "rawopen": // path_open on the preopen itself, bypassing Go's own path cleaning
		status(rawCreate(in.Path))
	case "env":
		wd, _ := os.Getwd()
		r := make([]byte, 16)
		answer("ok", "", map[string]any{"args": os.Args, "env": os.Environ(), "cwd": wd,
			"year": time.Now().Year(), "random": randomBytes(r)})
	case "loop": // says so in the workdir, then never ends
		os.WriteFile("looping", nil, 0o644)
		for {
		}
	case "sleep":
		time.Sleep(time.Hour)
		answer("ok", "slept", nil)
	case "hog": // n MB at a time, kept, until the memory runs out
		var keep [][]byte
		for {
			b := make([]byte, max(in.N, 1)<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	case "silent":
	case "junk":
		fmt.Println("hello, this is not JSON")
	case "shape":
		fmt.Println(`{"status": "maybe", "output": "x"}`)
	case "two":
		fmt.Println(`{"status": "ok"}`)
		fmt.Println(`{"status": "ok"}`)
	case "exit":
		fmt.Fprintln(os.Stderr, "something broke")
		os.Exit(3)
	case "exit-after-answer":
		answer("error", "answered, then exited 1", nil)
		os.Exit(1)
	case "flood": // n MB on stdout
		line := strings.Repeat("x", 1023) + "\n"
		for i := 0; i < in.N*1024; i++ {
			os.Stdout.WriteString(line)
		}
	case "panic":
		panic("the tool panicked")
	default:
		answer("error", "unknown op "+in.Op, nil)
	}
}

func answer(status, output string, data any) {
	json.NewEncoder(os.Stdout).Encode(map[string]any{"status": status, "output": output, "data": data})
}

// status answers ok, or error with the error's text.
func status(err error) {
	if err != nil {
		answer("error", err.Error(), nil)
		return
	}
	answer("ok", "done", nil)
}

func randomBytes(b []byte) string {
	if _, err := io.ReadFull(randReader{}, b); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%x", b)
}

//go:wasmimport wasi_snapshot_preview1 random_get
func randomGet(buf unsafe.Pointer, n uint32) uint32

type randReader struct{}

func (randReader) Read(b []byte) (int, error) {
	if e := randomGet(unsafe.Pointer(&b[0]), uint32(len(b))); e != 0 {
		return 0, fmt.Errorf("random_get: errno %d", e)
	}
	return len(b), nil
}

//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags uint32, path unsafe.Pointer, pathLen uint32, oflags uint32, rightsBase uint64, rightsInheriting uint64, fdflags uint32, newFD unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 fd_close
func fdClose(fd int32) uint32

// rawCreate creates path relative to the preopen (fd 3) with the host's path_open, as a module in any
// language could, without Go's cleaning of "..".
func rawCreate(path string) error {
	b := []byte(path)
	var fd int32
	const oflagCreat = 1
	if e := pathOpen(3, 1, unsafe.Pointer(&b[0]), uint32(len(b)), oflagCreat, ^uint64(0), ^uint64(0), 0, unsafe.Pointer(&fd)); e != 0 {
		return fmt.Errorf("path_open %q: errno %d", path, e)
	}
	fdClose(fd)
	return nil
}

// rewind lists the directory dir through one descriptor, renames target (something else) into dir's place,
// and lists through the same descriptor again from the start, which makes the host open dir's name anew.
func rewind(dir, target string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadDir(-1); err != nil {
		return err
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		return err
	}
	if err := os.Rename(target, dir); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = f.ReadDir(-1)
	return err
}

// fsops uses every file operation Go's os has on wasip1, each checked, and leaves d/kept behind.
func fsops() error {
	steps := []struct {
		name string
		do   func() error
	}{
		{"mkdir", func() error { return os.Mkdir("d", 0o755) }},
		{"create", func() error { return os.WriteFile("d/a", []byte("one\n"), 0o644) }},
		{"append", func() error {
			f, err := os.OpenFile("d/a", os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteString("two\n"); err != nil {
				return err
			}
			return f.Close()
		}},
		{"read appended", func() error { return expect("d/a", "one\ntwo\n") }},
		{"pwrite", func() error {
			f, err := os.OpenFile("d/a", os.O_RDWR, 0)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("ONE"), 0); err != nil {
				return err
			}
			b := make([]byte, 3)
			if _, err := f.ReadAt(b, 4); err != nil || string(b) != "two" {
				return fmt.Errorf("pread: %q, %v", b, err)
			}
			return f.Close()
		}},
		{"truncate", func() error { return os.Truncate("d/a", 3) }},
		{"read truncated", func() error { return expect("d/a", "ONE") }},
		{"rename", func() error { return os.Rename("d/a", "d/b") }},
		{"stat", func() error {
			fi, err := os.Stat("d/b")
			if err != nil || fi.Size() != 3 || fi.IsDir() {
				return fmt.Errorf("%v, %v", fi, err)
			}
			return nil
		}},
		{"chtimes", func() error {
			when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			if err := os.Chtimes("d/b", when, when); err != nil {
				return err
			}
			fi, err := os.Stat("d/b")
			if err != nil || !fi.ModTime().Equal(when) {
				return fmt.Errorf("mtime %v, %v", fi.ModTime(), err)
			}
			return nil
		}},
		{"link", func() error { return os.Link("d/b", "d/hard") }},
		{"symlink", func() error { return os.Symlink("b", "d/soft") }},
		{"readlink", func() error {
			if t, err := os.Readlink("d/soft"); err != nil || t != "b" {
				return fmt.Errorf("%q, %v", t, err)
			}
			return nil
		}},
		{"lstat", func() error {
			fi, err := os.Lstat("d/soft")
			if err != nil || fi.Mode()&os.ModeSymlink == 0 {
				return fmt.Errorf("%v, %v", fi, err)
			}
			return nil
		}},
		{"readdir", func() error {
			des, err := os.ReadDir("d")
			var names []string
			for _, de := range des {
				names = append(names, de.Name())
			}
			if err != nil || strings.Join(names, ",") != "b,hard,soft" {
				return fmt.Errorf("%v, %v", names, err)
			}
			return nil
		}},
		{"remove file", func() error { return os.Remove("d/soft") }},
		{"remove non-empty dir", func() error {
			if err := os.Remove("d"); err == nil {
				return fmt.Errorf("removed a directory that holds files")
			}
			return nil
		}},
		{"remove all", func() error { return os.RemoveAll("d") }},
		{"mkdir all", func() error { return os.MkdirAll("e/f", 0o755) }},
		{"keep", func() error { return os.WriteFile("e/f/kept", []byte("kept"), 0o644) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %v", s.name, err)
		}
	}
	return nil
}

func expect(path, want string) error {
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		return fmt.Errorf("%s holds %q, %v; want %q", path, b, err, want)
	}
	return nil
}
