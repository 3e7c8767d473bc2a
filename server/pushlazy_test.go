package server

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/a2a"
)

// TestPushOpensAtFirstCallOnANewStore: a member whose task store this start created opens no push
// notifier, and adds no push tables to the file, until a caller asks for push; tasks before that run
// as ever; the first config then opens it, and its deliveries arrive.
func TestPushOpensAtFirstCallOnANewStore(t *testing.T) {
	root := t.TempDir()
	f := pushFormation(t, root, time.Millisecond)
	defer shutdown(t, f)
	defer os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	file := filepath.Join(root, "data", "members", "worker", "tasks.db")
	c := a2agoClient(t, f.Members[0].URL, "op")
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("job"), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	if hasTable(t, file, "push_configs") {
		t.Fatal("the push tables are in a new store before anyone asked for push")
	}
	hook := newWebhook(t, 0)
	if _, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: res.(*a2ago.Task).ID, URL: hook.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if !hasTable(t, file, "push_configs") {
		t.Fatal("the first config opened no notifier")
	}
	os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	hook.until(t, a2a.TaskStateCompleted)
}

// hasTable reports whether the SQLite file at path has the table name.
func hasTable(t *testing.T, path, name string) bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
