package records

import (
	"fmt"
	"os"
	"path/filepath"
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

// A result that cannot be written is reported: by Close when nothing else is written after it.
func TestResultFailureIsReported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "out"))
	r.WriteResult("lost")
	if err := r.Close(); err == nil {
		t.Error("Close reported nothing though out/ was gone")
	}
}
