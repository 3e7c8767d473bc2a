package records

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A bound task's records carry its span up to its task_end; other records, and a record that names its
// own span, are left as they are.
func TestBoundTasksRecordsCarryTheirSpan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ses")
	r, err := Open(dir, "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	r.Write("task_start", "tsk_a", nil) // before Bind: no span
	r.Bind("tsk_a", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	r.Write("task_start", "tsk_a", nil)
	r.Write("tool_call", "tsk_a", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "1111111111111111"})
	r.Write("task_start", "tsk_b", nil) // another task, never bound
	r.Write("session_status", "", nil)
	r.WriteAll([]Record{{Type: "task_end", Task: "tsk_a"}})
	r.Write("task_reopened", "tsk_a", nil) // after its task_end: unbound
	r.Bind("", "x", "y")                   // no task: ignored
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec["type"].(string)+" "+str(rec["task"])+" "+str(rec["trace_id"])+" "+str(rec["span_id"]))
	}
	want := []string{
		"task_start tsk_a  ",
		"task_start tsk_a 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7",
		"tool_call tsk_a 4bf92f3577b34da6a3ce929d0e0e4736 1111111111111111",
		"task_start tsk_b  ",
		"session_status   ",
		"task_end tsk_a 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7",
		"task_reopened tsk_a  ",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
}

// Tasks whose task_end never comes do not pile up.
func TestBoundTasksAreBounded(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "ses"), "ses_1", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 10 * maxBound {
		r.Bind(strings.Repeat("t", i+1), "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	}
	if n := len(r.spans.byTask); n > maxBound {
		t.Errorf("%d tasks bound, want at most %d", n, maxBound)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
