package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Answers written faster than the file is replaced leave the latest one in out/result.txt by Close at the
// latest, and no temporary file behind.
func TestResultHoldsTheLatestAnswer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := r.WriteResult(fmt.Sprintf("answer %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out", "result.txt"))
	if err != nil || string(got) != "answer 999" {
		t.Errorf("out/result.txt = %q, %v; want the last answer", got, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "out"))
	if len(entries) != 1 {
		t.Errorf("out/ holds %d files, want result.txt alone", len(entries))
	}
}

// out/result.txt is replaced at once after a quiet moment, then at most once every resultEvery: the
// answers of that interval wait, and only the latest of them is written, at the interval's end or by
// Close.
func TestResultReplacedAtMostOnceAnInterval(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := open(dir, "ses_1", time.Now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "out", "result.txt")
	read := func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	if err := r.WriteResult("first"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); read() != "first" && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := read(); got != "first" {
		t.Fatalf("out/result.txt = %q, want the first answer written at once", got)
	}
	for _, a := range []string{"second", "third"} {
		if err := r.WriteResult(a); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := read(); got != "first" {
		t.Errorf("out/result.txt = %q within the interval, want it unreplaced", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "third" {
		t.Errorf("out/result.txt = %q after Close, want the latest answer", got)
	}
}

// A result that cannot be written is reported: by Close when nothing else is written after it.
func TestResultFailureIsReported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// A file where out/ goes: out/ cannot be made, nor result.txt written.
	os.RemoveAll(filepath.Join(dir, "out"))
	if err := os.WriteFile(filepath.Join(dir, "out"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.WriteResult("lost")
	if err := r.Close(); err == nil {
		t.Error("Close reported nothing though out/ was gone")
	}
}

// A session's logs/ and out/ are made by their first file, not by Open: a formation of a thousand
// members makes two thousand directories fewer at its start.
func TestDirectoriesAtFirstUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"logs", "out"} {
		if _, err := os.Lstat(filepath.Join(dir, d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s/ after Open: %v, want none yet", d, err)
		}
	}
	r.WriteResult("the answer")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "out", "result.txt")); err != nil || string(got) != "the answer" {
		t.Errorf("out/result.txt = %q, %v; want the answer", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "out")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("out/: %v, %v; want a directory of mode 0700", fi, err)
	}
}

// WriteAll writes each record as a line of its own, in order, with the fields Write sets; a record that
// cannot be encoded is reported and the others are written all the same.
func TestWriteAllWritesEveryRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Type: "task_end", Task: "tsk_1", Fields: map[string]any{"state": "TASK_STATE_CANCELED"}},
		{Type: "task_end", Task: "tsk_bad", Fields: map[string]any{"bad": func() {}}},
		{Type: "task_end", Task: "tsk_2", Fields: map[string]any{"state": "TASK_STATE_CANCELED"}},
	}
	if err := r.WriteAll(recs); err == nil || !strings.Contains(err.Error(), "trace record task_end") {
		t.Errorf("WriteAll = %v, want the error of the record that cannot be encoded", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if rec["type"] != "task_end" || rec["session"] != "ses_1" || rec["ts"] == nil || rec["state"] != "TASK_STATE_CANCELED" {
			t.Errorf("record %v lacks a field", rec)
		}
		got = append(got, rec["task"].(string))
	}
	if want := []string{"tsk_1", "tsk_2"}; !slices.Equal(got, want) {
		t.Errorf("trace.jsonl tasks = %v, want %v", got, want)
	}
}
