package setup

import (
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/capsule"
)

// The deadline is the earlier of the session's own and the one it inherits; session_start names only
// what is set.
func TestDeadlineAndStartFields(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if d := Deadline(start, 0, time.Time{}); !d.IsZero() {
		t.Errorf("no deadline: %v", d)
	}
	if d := Deadline(start, time.Hour, start.Add(time.Minute)); !d.Equal(start.Add(time.Minute)) {
		t.Errorf("inherited earlier: %v", d)
	}
	if d := Deadline(start, time.Minute, start.Add(time.Hour)); !d.Equal(start.Add(time.Minute)) {
		t.Errorf("own earlier: %v", d)
	}
	f := Start{Member: "m", Capsule: "c", Tools: []string{}}.Fields()
	for _, k := range []string{"deadline", "driver", "transport", "parent", "recovered_tasks"} {
		if _, ok := f[k]; ok {
			t.Errorf("session_start has %s unset", k)
		}
	}
	f = Start{Deadline: start, Driver: "d", Harness: &capsule.Harness{Command: []string{"h"}, Dialect: "x"}, ToolServer: "u",
		Sub: true, Parent: "ses_p", Delegation: "dlg_d", Depth: 1}.Fields()
	if f["deadline"] != "2026-01-02T03:04:05Z" || f["driver"] != "d" || f["tool_server"] != "u" || f["depth"] != 1 || f["parent"] != "ses_p" {
		t.Errorf("session_start: %v", f)
	}
}
