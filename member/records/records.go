package records

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"
)

// Records is a session's records directory: trace.jsonl, logs/ and out/. Writes are serialized and each
// record is one line, written with a single write call so a crash never leaves half a line behind another.
type Writer struct {
	dir     string
	session string
	now     func() time.Time

	mu    sync.Mutex
	trace *os.File
}

// OpenRecords creates (or reopens) the records directory dir for session.
func Open(dir, session string, now func() time.Time) (*Writer, error) {
	for _, d := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "out")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("records directory: %w", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "trace.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("records directory: %w", err)
	}
	return &Writer{dir: dir, session: session, now: now, trace: f}, nil
}

// Dir returns the records directory.
func (r *Writer) Dir() string { return r.dir }

// Write appends one record of type typ to trace.jsonl. fields must not use the keys ts, type, session
// and task, which Write sets.
func (r *Writer) Write(typ, task string, fields map[string]any) error {
	rec := make(map[string]any, len(fields)+4)
	for k, v := range fields {
		rec[k] = v
	}
	rec["ts"] = r.now().UTC().Format(time.RFC3339Nano)
	rec["type"] = typ
	rec["session"] = r.session
	if task != "" {
		rec["task"] = task
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("trace record %s: %w", typ, err)
	}
	line = append(line, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.trace.Write(line); err != nil {
		return fmt.Errorf("trace record %s: %w", typ, err)
	}
	return nil
}

// WriteResult replaces out/result.txt with the latest answer, atomically.
func (r *Writer) WriteResult(text string) error {
	tmp, err := os.CreateTemp(filepath.Join(r.dir, "out"), ".result-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(r.dir, "out", "result.txt"))
}

// Close closes trace.jsonl.
func (r *Writer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trace.Close()
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
