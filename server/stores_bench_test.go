package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/store/postgres"
)

// The benchmarks of issue 34 run every door on both stores side by side (BenchmarkVersus,
// BenchmarkStreamVersus, BenchmarkSubscribers, BenchmarkMemberCall, BenchmarkFormationSend,
// BenchmarkFormationCPU): the door on SQLite, as before, and the same door on PostgreSQL (pgtest's
// server of the test binary, on its Unix socket, fsync on), in the same run. Where PostgreSQL is not
// installed, each says so in one line (b.Log) and measures SQLite alone.

// benchPG returns the test binary's PostgreSQL server, started if no test has, or nil, having said why in
// b's log, when PostgreSQL is not installed: the benchmark then goes on with SQLite alone. A server that
// is installed but does not start fails b, as it fails a test.
func benchPG(b *testing.B) *pgtest.Server {
	b.Helper()
	p := &pgProbe{TB: b}
	done := make(chan *pgtest.Server)
	// pgtest.Start skips its caller where the binaries are absent (runtime.Goexit): the probe keeps that
	// from ending the benchmark by running Start on a goroutine of its own and noting why.
	go func() {
		var s *pgtest.Server
		defer func() { done <- s }()
		s = pgtest.Start(p)
	}()
	s := <-done
	switch {
	case p.fatal != "":
		b.Fatal(p.fatal)
	case s == nil:
		b.Logf("the door on PostgreSQL is left out: %s", p.skip)
	}
	return s
}

// pgProbe is the testing.TB pgtest.Start is given by benchPG: a skip or a failure is noted and ends
// Start's goroutine instead of the benchmark's.
type pgProbe struct {
	testing.TB
	skip, fatal string
}

func (p *pgProbe) Helper()                   {}
func (p *pgProbe) Skip(args ...any)          { p.skip = fmt.Sprint(args...); runtime.Goexit() }
func (p *pgProbe) Skipf(f string, a ...any)  { p.skip = fmt.Sprintf(f, a...); runtime.Goexit() }
func (p *pgProbe) SkipNow()                  { p.skip = "skipped"; runtime.Goexit() }
func (p *pgProbe) Fatal(args ...any)         { p.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (p *pgProbe) Fatalf(f string, a ...any) { p.fatal = fmt.Sprintf(f, a...); runtime.Goexit() }
func (p *pgProbe) FailNow()                  { p.fatal = "pgtest failed"; runtime.Goexit() }

// startDoorPG is startDoor with the member's tasks in a database of its own on pg instead of a SQLite
// file: the same capsule, session and door configuration, so that a ratio of the two doors is the
// store's. The fixture's store (the SQLite one) is nil.
func startDoorPG(b *testing.B, pg *pgtest.Server, files map[string]string) *fixture {
	b.Helper()
	root := b.TempDir()
	dir := filepath.Join(root, "capsule")
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	c, err := capsule.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	st, err := postgres.Open(context.Background(), pg.NewDatabase(b), postgres.Config{Retention: c.Store.Retention})
	if err != nil {
		b.Fatal(err)
	}
	reg, wrapped := NewRegistry("solo")
	series, err := metrics.New(wrapped)
	if err != nil {
		b.Fatal(err)
	}
	hub := events.New(events.Config{})
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String()
	global := filepath.Join(root, "global-store")
	sess, err := member.Start(member.Config{
		Member: "solo", Formation: "test", Capsule: c, Store: st,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: filepath.Join(root, "work"), Metrics: series,
		Events: hub, DoorURL: url, ArtifactsDir: filepath.Join(root, "data", "artifacts"),
		Getenv: func(k string) string {
			if k == "MUR_STORE_DIR" {
				return global
			}
			return os.Getenv(k)
		},
	})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	f := &fixture{t: b, dir: dir, session: sess, hub: hub, srv: srv, url: url}
	door, err := NewDoor(DoorConfig{
		Member: "solo", Roster: testRoster(b, root), Executor: sess,
		Tokens:   Tokens{Operator: testOperatorToken, Formation: testFormationToken},
		Card:     NewCard("solo", c.Description, "test", url, "test"),
		MaxBody:  64 << 10,
		Gatherer: reg, Registerer: wrapped, Events: hub, StreamWriteTimeout: 10 * time.Minute,
		AnswersMessage: c.AnswersWithMessage(),
	})
	if err != nil {
		b.Fatal(err)
	}
	f.door = door
	srv.Config.Handler = door
	srv.Start()
	b.Cleanup(func() {
		door.CloseStreams()
		f.release()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := sess.Close(ctx); err != nil {
			b.Errorf("session close: %v", err)
		}
		srv.Close()
		if err := st.Close(); err != nil {
			b.Errorf("store close: %v", err)
		}
	})
	return f
}
