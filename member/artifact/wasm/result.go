package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// Status values of a result.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Stop is the limit that stopped a module.
type Stop string

// The limits that stop a module.
const (
	StopNone   Stop = ""
	StopTime   Stop = "time"
	StopMemory Stop = "memory"
)

// Result is what the module did.
type Result struct {
	// Status is the module's status when it answered; StatusError when it failed (Failure says how).
	Status string
	// Output is the last Call.OutputLimit bytes of the result's output, cut at a character boundary;
	// OutputBytes its whole length.
	Output      string
	OutputBytes int64
	// Data is the result's data as the module wrote it; nil when absent or null.
	Data json.RawMessage
	// Failure is "" when the module answered; otherwise sentences saying what it did wrong, ending with
	// the tail of its stderr when it wrote any.
	Failure string
	// Stopped is the limit that stopped the module, and Limit says it in words for a note:
	// "its time limit of 5s", "its memory limit of 64 MB".
	Stopped Stop
	Limit   string
	// ExitCode is the module's exit code (0 when it returned from main).
	ExitCode uint32
	// Stderr is the module's stderr, its first and last 2 KiB when longer (a runtime's fatal error is at
	// the top, its stack at the bottom); StderrBytes all it wrote there.
	Stderr      string
	StderrBytes int64
	// Cold is true when this call compiled the module (no compiled copy was in this Runner's memory).
	Cold bool
}

// stop records the limit that stopped the module; msg is the failure's first sentence, "" for the plain one.
func (res *Result) stop(s Stop, call Call, msg string) {
	res.Stopped = s
	switch s {
	case StopTime:
		res.Limit = fmt.Sprintf("its time limit of %s", call.Timeout)
	case StopMemory:
		res.Limit = fmt.Sprintf("its memory limit of %d MB", call.MemoryMB)
	}
	if msg == "" {
		msg = fmt.Sprintf("The module was stopped by %s.", res.Limit)
	}
	res.fail(msg)
}

// fail makes the result a failure: msg, then the tail of stderr.
func (res *Result) fail(msg string) {
	res.Status = StatusError
	res.Output, res.OutputBytes, res.Data = "", 0, nil
	if res.StderrBytes > 0 {
		shown := "all"
		if res.StderrBytes > diagTail {
			shown = fmt.Sprintf("the first and last %d of %d bytes", diagTail/2, res.StderrBytes)
		}
		msg += fmt.Sprintf("\nIts stderr (%s):\n%s", shown, res.Stderr)
	}
	res.Failure = msg
}

// resultShape is the answer a tool writes, as its failures quote it.
const resultShape = `{"status": "ok"|"error", "output": "…", "data": …}`

// capture is a module's stdout or stderr: the first keep bytes (the result document), the last bytes (for
// a failure's message), and how many bytes were written in all. Only the module's goroutine writes it; it
// is read once the module has ended, except by text, which Run also calls on the stderr of a module it
// stopped waiting for, which may write still.
type capture struct {
	keep int

	mu   sync.Mutex // guards the fields below
	head []byte
	tail tail
	n    int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	if room := c.keep - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	_, _ = c.tail.Write(p) // memory: a tail's Write never fails
	return len(p), nil
}

// text is all that was written when head and tail hold it, else the head, a mark, and the tail; and how
// many bytes were written.
func (c *capture) text() (string, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := int64(len(c.head) + len(c.tail.buf))
	switch {
	case c.n <= int64(len(c.head)):
		return string(c.head), c.n
	case c.n <= kept:
		return string(c.head) + string(c.tail.buf[kept-c.n:]), c.n
	}
	return fmt.Sprintf("%s\n… %d bytes left out …\n%s", c.head, c.n-kept, c.tail.buf), c.n
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.buf) }

// answer fills the result from the module's stdout when it holds a well-formed result, and reports
// whether it did.
func (res *Result) answer(stdout *capture, outputLimit int) bool {
	if stdout.n == 0 || stdout.n > int64(stdout.keep) {
		return false
	}
	doc, err := parseResult(stdout.head)
	if err != nil {
		return false
	}
	res.Status = doc.status
	res.OutputBytes = int64(len(doc.output))
	res.Output = lastBytes(doc.output, outputLimit)
	res.Data = doc.data
	return true
}

// fault says why the module's stdout is not a result.
func (c *capture) fault(resultLimit, outputLimit int) string {
	switch {
	case c.n == 0:
		return fmt.Sprintf("The module wrote nothing on stdout; a tool writes one JSON object %s there.", resultShape)
	case c.n > int64(resultLimit):
		return fmt.Sprintf("The module wrote %d bytes on stdout, more than the %d bytes a result may have.", c.n, resultLimit)
	}
	_, err := parseResult(c.head)
	show := diagTail
	if outputLimit > 0 {
		show = min(show, outputLimit)
	}
	text := lastBytes(c.tail.String(), show)
	shown := "all"
	if int64(len(text)) < c.n {
		shown = fmt.Sprintf("last %d of %d bytes", len(text), c.n)
	}
	return fmt.Sprintf("The module did not write a result on stdout: %v. A tool writes one JSON object %s on stdout and nothing else. Its stdout (%s):\n%s",
		err, resultShape, shown, text)
}

type resultDoc struct {
	status string
	output string
	data   json.RawMessage
}

// parseResult reads a result document strictly: one JSON object, status "ok" or "error", output a
// string, data anything, no other key.
func parseResult(b []byte) (resultDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return resultDoc{}, fmt.Errorf("it is not JSON (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return resultDoc{}, errors.New("more follows the first JSON value")
	}
	if v[0] != '{' {
		return resultDoc{}, errors.New("it is JSON but not an object")
	}
	var doc struct {
		Status *string          `json:"status"`
		Output string           `json:"output"`
		Data   *json.RawMessage `json:"data"`
	}
	dec = json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return resultDoc{}, fmt.Errorf("its %q is a JSON %s, not a %s", te.Field, te.Value, te.Type)
		}
		return resultDoc{}, fmt.Errorf("it is not of that shape (%v)", err)
	}
	switch {
	case doc.Status == nil:
		return resultDoc{}, errors.New(`it has no "status"`)
	case *doc.Status != StatusOK && *doc.Status != StatusError:
		return resultDoc{}, fmt.Errorf(`its "status" is %q; it must be "ok" or "error"`, *doc.Status)
	}
	r := resultDoc{status: *doc.Status, output: doc.Output}
	if doc.Data != nil && string(*doc.Data) != "null" {
		r.data = *doc.Data
	}
	return r, nil
}

// lastBytes keeps the last limit bytes of s (all of it for limit <= 0), starting at a character boundary.
func lastBytes(s string, limit int) string {
	if limit <= 0 || len(s) <= limit {
		return s
	}
	t := s[len(s)-limit:]
	for i := 0; i < utf8.UTFMax-1 && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	return t
}
