package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// GetByMessage reads through the message index, not the whole table: every SendMessage asks it, so a
// scan would make each send cost the size of the store.
func TestGetByMessageUsesItsIndex(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.read.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+getByMessageSQL, "op", "msg", "TASK_STATE_REJECTED")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); !strings.Contains(got, "USING INDEX tasks_message") {
		t.Errorf("GetByMessage's plan is %q, want it to search the index tasks_message", got)
	}
}
