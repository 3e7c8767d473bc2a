package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/roster"
)

// pgURL is a pgtest database as roster.yaml's store: writes it: a postgres:// URL, here on the test
// server's Unix socket.
func pgURL(t *testing.T, dsn string) string {
	t.Helper()
	return pgtest.URL(t, dsn)
}

// A member whose roster entry names a PostgreSQL store keeps its tasks there: a task sent through the door
// is in the database, not in a SQLite file, and it is still there, whole, for the member's next process.
// Push is off for such a member (its configs are kept in the SQLite file), and says so.
func TestMemberOnPostgres(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(echoAgent), 0o644)
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: pg\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n    store: "+pgURL(t, dsn)+"\n"), 0o644)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*Formation, *fixture) {
		f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
			RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken}, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return f, &fixture{t: t, url: f.Members[0].URL}
	}
	stop := func(f *Formation) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}

	f, fx := start()
	c := fx.client(testOperatorToken)
	task := sendTask(t, c, "hello postgres", false)
	if task.Status.State != a2ago.TaskStateCompleted || responseText(task) != "echo: hello postgres" {
		t.Fatalf("task %s, answer %q", task.Status.State, responseText(task))
	}
	_, err = c.CreateTaskPushConfig(context.Background(), &a2ago.PushConfig{TaskID: task.ID, URL: "http://127.0.0.1:9/hook"})
	if err == nil || !strings.Contains(err.Error(), "push") {
		t.Errorf("a push config on a member on PostgreSQL: %v, want push notifications refused as unsupported", err)
	}
	stop(f)
	if _, err := os.Stat(filepath.Join(root, "data", "members", "solo", "tasks.db")); err == nil {
		t.Error("the member wrote a SQLite task store beside its PostgreSQL one")
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var state string
	if err := conn.QueryRow(context.Background(), `SELECT count(*), max(state) FROM tasks`).Scan(&n, &state); err != nil || n != 1 || state != string(a2ago.TaskStateCompleted) {
		t.Errorf("the database holds %d task(s), state %q (%v); want the one completed", n, state, err)
	}
	conn.Close(context.Background())

	f, fx = start()
	defer stop(f)
	c = fx.client(testOperatorToken)
	again, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: task.ID})
	if err != nil || responseText(again) != "echo: hello postgres" {
		t.Fatalf("GetTask after a restart: %v, answer %q", err, responseText(again))
	}
	list, err := c.ListTasks(context.Background(), &a2ago.ListTasksRequest{})
	if err != nil || list.TotalSize != 1 || list.Tasks[0].ID != task.ID {
		t.Errorf("ListTasks after a restart: %v, %+v", err, list)
	}
}

// A member on PostgreSQL whose database goes away answers a new task with a clear error, saying the
// database is unreachable and that the member keeps running, and takes tasks again once it is back;
// nothing acknowledged before is lost. (It stops and starts the test binary's one PostgreSQL, so it does
// not run in parallel with the other tests that use it.)
func TestMemberOnPostgresWhenTheDatabaseGoesAway(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(echoAgent), 0o644)
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: pg\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n    store: "+pgURL(t, dsn)+"\n"), 0o644)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Shutdown(ctx)
	}()
	c := (&fixture{t: t, url: f.Members[0].URL}).client(testOperatorToken)
	before := sendTask(t, c, "before", false)

	pg.Kill(t)
	_, err = c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("while it is away")})
	if err == nil || !strings.Contains(err.Error(), "is unreachable") || !strings.Contains(err.Error(), "the member keeps running") {
		t.Errorf("SendMessage with the database away: %v; want an error saying it is unreachable and the member keeps running", err)
	}
	pgtest.Start(t) // back, from its write-ahead log

	after := sendTask(t, c, "after", false)
	if after.Status.State != a2ago.TaskStateCompleted || responseText(after) != "echo: after" {
		t.Errorf("the first task once the database is back: %s %q", after.Status.State, responseText(after))
	}
	got, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: before.ID})
	if err != nil || responseText(got) != "echo: before" {
		t.Errorf("the task acknowledged before the database went away: %v, %q", err, responseText(got))
	}
}
