package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"
)

// Writer writes a session's records directory: trace.jsonl, logs/ and out/ (each directory made by its
// first file: most sessions of a large formation write neither). Writes are serialized and each record
// is one line, written with a single write call so a crash never leaves half a line behind another.
type Writer struct {
	dir     string
	session string
	now     func() time.Time

	mu    sync.Mutex
	trace *os.File

	spans spans // the spans traced tasks' records carry (Bind)

	// out/result.txt is written by a goroutine of its own, off the path of the task that ended: only the
	// latest answer matters, so answers that come faster than a file can be replaced are written once,
	// and the file is replaced at most once every resultEvery (an answer after a quiet moment at once).
	resultEvery time.Duration
	outMade     bool // out/ exists: made by the first answer
	resultMu    sync.Mutex
	result      *string       // the answer not yet written; nil when there is none
	resultErr   error         // the last write's failure, returned by the next WriteResult
	resultKick  chan struct{} // capacity 1: result is set
	resultStop  chan struct{} // closed by Close
	resultDone  chan struct{} // closed once the writer has written the last answer and returned
}

// Open creates (or reopens) the records directory dir for session.
func Open(dir, session string, now func() time.Time) (*Writer, error) {
	return open(dir, session, now, resultEvery)
}

// open is Open with out/result.txt replaced at most once every every.
func open(dir, session string, now func() time.Time, every time.Duration) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("records directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "trace.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("records directory: %w", err)
	}
	r := &Writer{dir: dir, session: session, now: now, trace: f, resultEvery: every,
		resultKick: make(chan struct{}, 1), resultStop: make(chan struct{}), resultDone: make(chan struct{})}
	go r.writeResults()
	return r, nil
}

// Dir returns the records directory.
func (r *Writer) Dir() string { return r.dir }

// Record is one line of trace.jsonl: its type, its task ("" for none) and its fields, which must not use
// the keys ts, type, session and task, which the writer sets.
type Record struct {
	Type   Type
	Task   string
	Fields map[string]any
}

// Write appends one record of type typ to trace.jsonl. fields must not use the keys ts, type, session
// and task, which Write sets.
func (r *Writer) Write(typ Type, task string, fields map[string]any) error {
	return r.WriteAll([]Record{{Type: typ, Task: task, Fields: fields}})
}

// WriteAll appends recs to trace.jsonl in order, in one write call: a shutdown ending thousands of
// tasks writes their records at the cost of one. Each record is still a line of its own; a record
// that cannot be encoded is left out and its error returned.
func (r *Writer) WriteAll(recs []Record) error {
	var buf []byte
	var errs []error
	ts := r.now().UTC().Format(time.RFC3339Nano)
	for _, rc := range recs {
		rec := make(map[string]any, len(rc.Fields)+4)
		for k, v := range rc.Fields {
			rec[k] = v
		}
		rec["ts"] = ts
		rec["type"] = string(rc.Type)
		rec["session"] = r.session
		if rc.Task != "" {
			rec["task"] = rc.Task
			r.spans.addSpan(rec, rc.Type, rc.Task)
		}
		line, err := json.Marshal(rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("trace record %s: %w", rc.Type, err))
			continue
		}
		buf = append(append(buf, line...), '\n')
	}
	if len(buf) == 0 {
		return errors.Join(errs...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.trace.Write(buf); err != nil {
		errs = append(errs, fmt.Errorf("trace records: %w", err))
	}
	return errors.Join(errs...)
}

// WriteResult makes text the content of out/result.txt: the file is replaced atomically (a temporary file
// renamed over it, so a crash leaves the old answer or the new one, whole) by the records' result writer,
// soon after WriteResult returns, and by Close at the latest. When answers come faster than that, only
// the latest is written. The error is the previous write's, if it failed.
func (r *Writer) WriteResult(text string) error {
	r.resultMu.Lock()
	r.result = &text
	err := r.resultErr
	r.resultErr = nil
	r.resultMu.Unlock()
	select {
	case r.resultKick <- struct{}{}:
	default:
	}
	return err
}

// resultEvery is the least time between two replacements of out/result.txt. A replacement is a file
// made, written, closed and renamed: a member answering thousands of tasks a second spent more of its
// CPU on them than on its task store. A hundred a second keep the file as fresh as anyone can read it.
const resultEvery = 10 * time.Millisecond

// writeResults is the result writer: it runs from Open until Close, and writes what is left before it
// returns. After each replacement it lets resultEvery pass before the next; Close does not wait.
func (r *Writer) writeResults() {
	defer close(r.resultDone)
	for {
		select {
		case <-r.resultKick:
			r.flushResult()
		case <-r.resultStop:
			r.flushResult()
			return
		}
		t := time.NewTimer(r.resultEvery)
		select {
		case <-t.C:
		case <-r.resultStop:
			t.Stop()
			r.flushResult()
			return
		}
	}
}

// flushResult writes the latest answer, if one is waiting.
func (r *Writer) flushResult() {
	r.resultMu.Lock()
	text := r.result
	r.result = nil
	r.resultMu.Unlock()
	if text == nil {
		return
	}
	out := filepath.Join(r.dir, "out")
	var err error
	if !r.outMade {
		err = os.MkdirAll(out, 0o700)
		r.outMade = err == nil
	}
	if err == nil {
		err = replaceFile(filepath.Join(out, "result.txt"), *text)
	}
	if err != nil {
		r.outMade = false // made again by the next answer, should out/ be what went away
		r.resultMu.Lock()
		r.resultErr = fmt.Errorf("out/result.txt: %w", err)
		r.resultMu.Unlock()
	}
}

// replaceFile replaces path's content with text atomically.
func replaceFile(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".result-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(text); err != nil {
		_ = tmp.Close()           // already failing: the write's error is the one to report
		_ = os.Remove(tmp.Name()) // cleanup on a failed path: the error returned is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name()) // cleanup on a failed path: the error returned is the one to report
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Close writes the latest answer to out/result.txt and closes trace.jsonl.
func (r *Writer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.resultStop:
	default:
		close(r.resultStop)
	}
	<-r.resultDone
	r.resultMu.Lock()
	err := r.resultErr
	r.resultErr = nil
	r.resultMu.Unlock()
	return errors.Join(err, r.trace.Close())
}

// ClipMax bounds what one field of a record quotes, such as a tool call's input and result.
const ClipMax = 16 << 10

// Clip cuts s to at most n bytes on a rune boundary, saying how much was cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[… %d more bytes not recorded]", len(s)-cut)
}
