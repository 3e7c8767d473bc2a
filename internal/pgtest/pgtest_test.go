package pgtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// query returns the one value of a one-row query.
func query[T any](t *testing.T, conn *pgx.Conn, q string) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// databaseExists reports whether the server has a database called name.
func databaseExists(t *testing.T, s *Server, name string) bool {
	t.Helper()
	return query[bool](t, connect(t, s.dsn("postgres")),
		fmt.Sprintf("SELECT EXISTS (SELECT FROM pg_database WHERE datname = '%s')", name))
}

// Two databases of one test are distinct and each works; both are dropped when the test ends.
func TestNewDatabase(t *testing.T) {
	start := time.Now()
	s := Start(t)
	t.Logf("Start took %v", time.Since(start))
	var names []string
	t.Run("two", func(t *testing.T) {
		a, b := s.NewDatabase(t), s.NewDatabase(t)
		if a == b {
			t.Fatalf("both databases are %s", a)
		}
		for _, dsn := range []string{a, b} {
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, cfg.Database)
			if got := query[int](t, connect(t, dsn), "SELECT 1"); got != 1 {
				t.Fatalf("SELECT 1 on %s = %d", dsn, got)
			}
		}
		ca, cb := connect(t, a), connect(t, b)
		if _, err := ca.Exec(context.Background(), "CREATE TABLE only_in_a (x int)"); err != nil {
			t.Fatal(err)
		}
		if !query[bool](t, ca, "SELECT to_regclass('only_in_a') IS NOT NULL") {
			t.Error("the table created in the first database is not in it")
		}
		if query[bool](t, cb, "SELECT to_regclass('only_in_a') IS NOT NULL") {
			t.Error("the table created in the first database is in the second")
		}
		for _, name := range names {
			if !databaseExists(t, s, name) {
				t.Errorf("database %s does not exist during its test", name)
			}
		}
	})
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("database names %q", names)
	}
	for _, name := range names {
		if databaseExists(t, s, name) {
			t.Errorf("database %s is still there after its test", name)
		}
	}
}

// A row committed before Restart is there after it; a connection from before fails, a new one works.
func TestRestart(t *testing.T) {
	s := Start(t)
	dsn := s.NewDatabase(t)
	before := connect(t, dsn)
	if _, err := before.Exec(context.Background(), "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)
	if _, err := before.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Error("a connection opened before Restart still works after it")
	}
	if got := query[int](t, connect(t, dsn), "SELECT x FROM kept"); got != 42 {
		t.Errorf("after Restart the row is %d, want 42", got)
	}
}

// After Kill nothing answers, not even a connection whose backend was busy; Restart recovers what was
// committed. After Stop, Start brings the server back.
func TestKillAndStop(t *testing.T) {
	s := Start(t)
	dsn := s.NewDatabase(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	busy := connect(t, dsn)
	pid := query[int](t, busy, "SELECT pg_backend_pid()")
	sleeping := make(chan error, 1)
	go func() {
		_, err := busy.Exec(context.Background(), "SELECT pg_sleep(60)")
		sleeping <- err
	}()
	for query[int](t, conn, fmt.Sprintf("SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND state = 'active'", pid)) == 0 {
		time.Sleep(time.Millisecond)
	}

	s.Kill(t)
	// Kill returns when the server's processes are gone: the busy one too (or it is a zombie nobody
	// reaped).
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(stat), ") Z ") {
		t.Errorf("backend %d still runs after Kill: %s", pid, stat)
	}
	if err := <-sleeping; err == nil {
		t.Error("a query running during Kill succeeded")
	}
	if _, err := conn.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Error("a connection opened before Kill still works after it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("a new connection works after Kill")
	}
	s.Restart(t)
	if got := query[int](t, connect(t, dsn), "SELECT x FROM kept"); got != 7 {
		t.Errorf("after Kill and Restart the row is %d, want 7", got)
	}

	s.Stop()
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Close(ctx)
		t.Fatal("a new connection works after Stop")
	}
	if Start(t) != s {
		t.Fatal("Start returned another server")
	}
	if got := query[int](t, connect(t, dsn), "SELECT x FROM kept"); got != 7 {
		t.Errorf("after Stop and Start the row is %d, want 7", got)
	}
}

// fsync is on unless a test turns it off, and SetFsync turns it on and off.
func TestSetFsync(t *testing.T) {
	s := Start(t)
	conn := connect(t, s.dsn("postgres"))
	if got := query[string](t, conn, "SHOW fsync"); got != "on" {
		t.Fatalf("fsync is %s at first, want on", got)
	}
	s.SetFsync(t, false)
	if got := query[string](t, connect(t, s.dsn("postgres")), "SHOW fsync"); got != "off" {
		t.Errorf("fsync is %s after SetFsync(false)", got)
	}
	s.SetFsync(t, true)
	if got := query[string](t, connect(t, s.dsn("postgres")), "SHOW fsync"); got != "on" {
		t.Errorf("fsync is %s after SetFsync(true)", got)
	}
}

// recorder is a testing.TB that records a skip or a failure and ends its goroutine, as testing's do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Skip(args ...any)                 { r.skipped = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) { r.Skip(fmt.Sprintf(format, args...)) }
func (r *recorder) SkipNow()                         { r.Skip("SkipNow") }
func (r *recorder) Fatal(args ...any)                { r.failed = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.Fatal(fmt.Sprintf(format, args...))
}
func (r *recorder) FailNow()                          { r.Fatal("FailNow") }
func (r *recorder) Error(args ...any)                 { r.failed = fmt.Sprint(args...) }
func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }

// Where no directory has initdb, Start skips in one line saying so.
func TestSkipWithoutBinaries(t *testing.T) {
	empty := t.TempDir()
	saved := binDirs
	binDirs = func() []string { return []string{empty} }
	t.Cleanup(func() { binDirs = saved })

	r := &recorder{TB: t}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(r)
		returned = true
	}()
	<-done
	if returned || r.failed != "" {
		t.Fatalf("Start returned (%v) or failed (%q) instead of skipping", returned, r.failed)
	}
	const want = "PostgreSQL is not installed (no initdb): "
	if !strings.HasPrefix(r.skipped, want) || !strings.Contains(r.skipped, empty) || strings.Contains(r.skipped, "\n") {
		t.Errorf("Start skipped with %q, want one line starting %q and naming %s", r.skipped, want, empty)
	}
	t.Log(r.skipped)
}
