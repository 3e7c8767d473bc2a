package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // the tests, then the test PostgreSQL stopped
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var epoch = time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)

// open opens a store on a fresh database (or on dsn, when given) and closes it when t ends.
func open(t *testing.T, cfg Config, dsn ...string) (*Store, string) {
	t.Helper()
	d := ""
	if len(dsn) > 0 {
		d = dsn[0]
	} else {
		d = database(t)
	}
	s, err := Open(t.Context(), d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, d
}

// connect is a plain connection to the database at dsn, for looking behind the store's back.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func task(n int, contextID string, state a2a.TaskState) *a2a.Task {
	id := a2a.TaskID(fmt.Sprintf("tsk_%04d", n))
	return &a2a.Task{
		ID: id, ContextID: contextID,
		Status: a2a.TaskStatus{State: state, Timestamp: a2a.NewTimestamp(epoch.Add(time.Duration(n) * time.Second))},
		History: []a2a.Message{{MessageID: a2a.MessageID(fmt.Sprintf("msg_%04d", n)), Role: a2a.RoleUser,
			Parts: []a2a.Part{a2a.TextPart("question <&> ✓ " + string(id))}, ContextID: contextID, TaskID: id}},
	}
}

func mustCreate(t *testing.T, s *Store, tasks ...*a2a.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := s.Create(t.Context(), tk); err != nil {
			t.Fatalf("Create %s: %v", tk.ID, err)
		}
	}
}

func version(t *testing.T, c *pgx.Conn, id a2a.TaskID) int64 {
	t.Helper()
	var v int64
	if err := c.QueryRow(t.Context(), `SELECT version FROM tasks WHERE id = $1`, string(id)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestReopenAtOnce: a store closed lets go of its database at once, so the next process (a restart) may
// open it the moment the first has closed it, not once the server has noticed the connection gone.
func TestReopenAtOnce(t *testing.T) {
	s, dsn := open(t, Config{})
	c := connect(t, dsn)
	for i := range 30 {
		s.Close()
		var held int
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = current_database()`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held != 0 {
			t.Fatalf("time %d: %d advisory locks still held once Close returned", i+1, held)
		}
		var err error
		if s, err = Open(t.Context(), dsn, Config{}); err != nil {
			t.Fatalf("reopening at once, time %d: %v", i+1, err)
		}
	}
	s.Close()
}

// TestSchema: Open creates the versioned schema, with the columns and indexes DESIGN §16 builds on, and a
// second Open leaves it as it is.
func TestSchema(t *testing.T) {
	s, dsn := open(t, Config{})
	s.Close()
	s2, _ := open(t, Config{}, dsn)
	s2.Close()
	c := connect(t, dsn)
	var v []int
	rows, _ := c.Query(t.Context(), `SELECT version FROM murmur_schema`)
	v, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || !slices.Equal(v, []int{SchemaVersion()}) {
		t.Fatalf("murmur_schema = %v, %v; want one row, version %d", v, err, SchemaVersion())
	}
	rows, _ = c.Query(t.Context(), `SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || is_identity
		FROM information_schema.columns WHERE table_name = 'tasks' ORDER BY ordinal_position`)
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"seq bigint NO YES", "id text NO NO", "context_id text NO NO", "state text NO NO",
		"status_ts bigint YES NO", "created bigint NO NO", "caller text NO NO", "version bigint NO NO", "task bytea NO NO", "message_id text NO NO",
		"owner text NO NO", "cancel_requested boolean NO NO", "event_seq bigint NO NO", "traceparent text NO NO"}
	if !slices.Equal(cols, want) {
		t.Errorf("tasks columns:\n%q\nwant\n%q", cols, want)
	}
	rows, _ = c.Query(t.Context(), `SELECT indexdef FROM pg_indexes WHERE tablename = 'tasks' ORDER BY indexname`)
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(idx, "\n")
	for _, w := range []string{"(context_id, seq)", "(state, seq)", "(caller, seq)", "(state, status_ts)", "UNIQUE INDEX tasks_seq ON public.tasks USING btree (seq)", "tasks_pkey", "(caller, message_id) WHERE (message_id <> ''::text)"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no index %s among\n%s", w, joined)
		}
	}
}

// TestNewerSchemaRefused: a database migrated by a newer mur is refused at Open, naming both versions.
func TestNewerSchemaRefused(t *testing.T) {
	s, dsn := open(t, Config{})
	s.Close()
	c := connect(t, dsn)
	newer := SchemaVersion() + 1
	if _, err := c.Exec(t.Context(), `UPDATE murmur_schema SET version = $1`, newer); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), dsn, Config{})
	want := fmt.Sprintf("the database's schema is version %d, newer than this mur's %d: upgrade mur", newer, SchemaVersion())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open = %v; want %q", err, want)
	}
}

// TestConcurrentOpen: processes starting at once against one new database all Open it (the advisory
// lock makes the migration one at a time), and the schema is created once.
func TestConcurrentOpen(t *testing.T) {
	dsn := database(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), dsn, Config{}) })
	}
	wg.Wait()
	opened := 0
	for i, err := range errs {
		switch {
		case err == nil:
			opened++
			stores[i].Close()
		case !strings.Contains(err.Error(), "is in use by another mur process"):
			t.Errorf("Open %d: %v", i, err)
		}
	}
	if opened < 1 {
		t.Errorf("%d of %d Opens succeeded, want at least one (each migrates, or waits for the one migrating)", opened, n)
	}
	var rowsN int
	if err := connect(t, dsn).QueryRow(t.Context(), `SELECT count(*) FROM murmur_schema`).Scan(&rowsN); err != nil || rowsN != 1 {
		t.Fatalf("murmur_schema rows = %d, %v; want 1", rowsN, err)
	}
}

// TestOneProcessPerDatabase: while a store is open, a second Open of its database is refused saying so
// (its Recover would end the first one's running tasks); once the first is closed, the database opens.
func TestOneProcessPerDatabase(t *testing.T) {
	dsn := database(t)
	first, err := Open(t.Context(), dsn, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), dsn, Config{}); err == nil || !strings.Contains(err.Error(), "is in use by another mur process") {
		t.Errorf("a second Open while the first is open: %v", err)
	}
	first.Close()
	second, err := Open(t.Context(), dsn, Config{})
	if err != nil {
		t.Fatalf("Open after the first store closed: %v", err)
	}
	second.Close()
}

// TestOpenErrors: an address that is not one, or a server that is not there, is explained, and the
// password never shows.
func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	for _, dsn := range []string{"postgres://alice:s3cr3t-pw@[::1/db", "host=/x password=s3cr3t-pw port=notaport"} {
		_, err := Open(ctx, dsn, Config{})
		if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), "not a PostgreSQL address") {
			t.Errorf("Open(%q) = %v", dsn, err)
		}
	}
	dir := t.TempDir()
	_, err := Open(ctx, "host="+dir+" user=alice password=s3cr3t-pw dbname=x", Config{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), "is unreachable") || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open on no server = %v", err)
	}
	missing := strings.Replace(database(t), "dbname='", "dbname='no_such_", 1)
	_, err = Open(ctx, missing+" password=s3cr3t-pw", Config{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), "createdb") {
		t.Errorf("Open on a missing database = %v", err)
	}
	t.Log(err)
}

// TestBytes: GetInScope returns the bytes json.Marshal wrote, and every write bumps the version.
func TestBytes(t *testing.T) {
	s, dsn := open(t, Config{})
	tk := task(1, "ctx", a2a.TaskStateSubmitted)
	tk.Metadata = map[string]any{"big": 12345678901234567890.0, "z": "\u2028", "a": []any{}}
	mustCreate(t, s, tk)
	want, _ := json.Marshal(tk)
	got, err := s.GetInScope(t.Context(), tk.ID, store.OperatorScope())
	if err != nil || string(got) != string(want) {
		t.Fatalf("GetInScope = %s, %v; want %s", got, err, want)
	}
	c := connect(t, dsn)
	if v := version(t, c, tk.ID); v != 1 {
		t.Errorf("version after Create = %d", v)
	}
	tk.Status.State = a2a.TaskStateWorking
	if err := s.Update(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	s.UpdateSoon(tk)
	if err := s.UpdateLater(t.Context(), tk)(); err != nil {
		t.Fatal(err)
	}
	if v := version(t, c, tk.ID); v != 4 {
		t.Errorf("version after 3 updates = %d", v)
	}
	if err := s.Update(t.Context(), task(2, "ctx", a2a.TaskStateWorking)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update of an unknown task = %v", err)
	}
	if err := s.Create(t.Context(), task(1, "ctx", a2a.TaskStateSubmitted)); err == nil {
		t.Error("a second Create of one id succeeded")
	}
	if _, err := s.Get(t.Context(), "tsk_\x00bad"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an id PostgreSQL cannot hold = %v", err)
	}
	if err := s.Create(t.Context(), &a2a.Task{ID: "tsk_\xff", ContextID: "c"}); err == nil {
		t.Error("Create of an invalid UTF-8 id succeeded")
	}
}

// stepped is task n with metadata step.
func stepped(n, step int) *a2a.Task {
	tk := task(n, "ctx", a2a.TaskStateWorking)
	tk.Metadata = map[string]any{"step": float64(step)}
	return tk
}

func stepOf(tk *a2a.Task) int { f, _ := tk.Metadata["step"].(float64); return int(f) }

// TestOrder: many goroutines each write one task through Create, UpdateSoon, UpdateLater and Update,
// mixed; the writes of each are committed in the order it handed them over (a reader never sees a step
// go back, and the last is the one kept), each write is its own (version counts them), and Settle
// returns once all before it are committed.
func TestOrder(t *testing.T) {
	s, dsn := open(t, Config{})
	ctx := t.Context()
	const tasks, steps = 40, 30
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var back sync.Map
	readers.Go(func() {
		last := map[a2a.TaskID]int{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			for n := range tasks {
				tk, err := s.Get(ctx, stepped(n, 0).ID)
				if err != nil {
					continue
				}
				if st := stepOf(tk); st < last[tk.ID] {
					back.Store(tk.ID, fmt.Sprintf("step %d after %d", st, last[tk.ID]))
				} else {
					last[tk.ID] = st
				}
			}
		}
	})
	var wg sync.WaitGroup
	for n := range tasks {
		wg.Go(func() {
			if err := s.Create(ctx, stepped(n, 0)); err != nil {
				t.Error(err)
				return
			}
			var waits []func() error
			for st := 1; st <= steps; st++ {
				switch st % 3 {
				case 0:
					s.UpdateSoon(stepped(n, st))
				case 1:
					waits = append(waits, s.UpdateLater(ctx, stepped(n, st)))
				case 2:
					if err := s.Update(ctx, stepped(n, st)); err != nil {
						t.Error(err)
					}
				}
			}
			s.UpdateSoon(stepped(n, steps+1))
			if err := s.Settle(ctx); err != nil {
				t.Error(err)
			}
			// Settle returned: the last UpdateSoon is committed.
			tk, err := s.Get(ctx, stepped(n, 0).ID)
			if err != nil || stepOf(tk) != steps+1 {
				t.Errorf("after Settle: %v, %v", tk, err)
			}
			for _, w := range waits {
				if err := w(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	back.Range(func(k, v any) bool { t.Errorf("task %s went back: %s", k, v); return true })
	c := connect(t, dsn)
	for n := range tasks {
		if v := version(t, c, stepped(n, 0).ID); v != steps+2 {
			t.Errorf("task %d: version %d, want %d", n, v, steps+2)
		}
	}
}

// TestCloseDrains: what UpdateSoon handed over before Close is committed by Close.
func TestCloseDrains(t *testing.T) {
	s, dsn := open(t, Config{})
	mustCreate(t, s, stepped(1, 0))
	for st := 1; st <= 500; st++ {
		s.UpdateSoon(stepped(1, st))
	}
	s.Close()
	if err := s.Create(t.Context(), stepped(2, 0)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Create after Close = %v", err)
	}
	s2, _ := open(t, Config{}, dsn)
	tk, err := s2.Get(t.Context(), stepped(1, 0).ID)
	if err != nil || stepOf(tk) != 500 {
		t.Fatalf("after Close: %v, %v", tk, err)
	}
}

// TestRecover: every task not in a terminal state ends failed with RestartMessage, in creation order;
// ended tasks are left byte for byte.
func TestRecover(t *testing.T) {
	s, dsn := open(t, Config{})
	ctx := t.Context()
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateSubmitted,
		a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateAuthRequired, a2a.TaskStateCanceled, a2a.TaskStateFailed}
	var all []*a2a.Task
	for i, st := range states {
		// Created in the reverse of their ids' order: Recover's order is creation's.
		tk := task(100-i, fmt.Sprintf("ctx_%d", i%3), st)
		all = append(all, tk)
		mustCreate(t, s, tk)
	}
	now := epoch.Add(time.Hour + 123456789)
	changed, err := s.Recover(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []a2a.TaskID{all[0].ID, all[2].ID, all[3].ID, all[5].ID}
	if !slices.Equal(changed, want) {
		t.Fatalf("Recover = %v, want %v", changed, want)
	}
	for _, orig := range all {
		got, err := s.Get(ctx, orig.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(want, orig.ID) {
			a, _ := json.Marshal(orig)
			b, _ := s.GetInScope(ctx, orig.ID, store.OperatorScope())
			if string(a) != string(b) {
				t.Errorf("ended task %s changed", orig.ID)
			}
			continue
		}
		st := got.Status
		if st.State != a2a.TaskStateFailed || st.Timestamp == nil || !st.Timestamp.Equal(now.Truncate(time.Millisecond)) ||
			st.Message == nil || st.Message.Role != a2a.RoleAgent || st.Message.TaskID != orig.ID ||
			st.Message.ContextID != orig.ContextID || len(st.Message.Parts) != 1 || st.Message.Parts[0].Text == nil || *st.Message.Parts[0].Text != store.RestartMessage ||
			!strings.HasPrefix(string(st.Message.MessageID), ids.PrefixMessage) {
			t.Errorf("recovered %s: %+v %+v", orig.ID, st, st.Message)
		}
		got.Status = orig.Status
		a, _ := json.Marshal(orig)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Errorf("Recover changed more than the status of %s", orig.ID)
		}
	}
	c := connect(t, dsn)
	if v := version(t, c, want[0]); v != 2 {
		t.Errorf("version after Recover = %d", v)
	}
	var state string
	var ts int64
	c.QueryRow(ctx, `SELECT state, status_ts FROM tasks WHERE id = $1`, string(want[1])).Scan(&state, &ts)
	if state != string(a2a.TaskStateFailed) || ts != now.UnixMilli() {
		t.Errorf("columns after Recover: %s %d", state, ts)
	}
	if again, err := s.Recover(ctx, now); err != nil || len(again) != 0 {
		t.Errorf("second Recover = %v, %v", again, err)
	}
}

// TestEndAll: the tasks of ids the store holds end with the state, message and time given, in the order
// of ids, an id given twice once, an unknown one left out; the rest of each task stays as it was.
func TestEndAll(t *testing.T) {
	s, dsn := open(t, Config{})
	ctx := t.Context()
	var all []*a2a.Task
	for n := range 50 {
		tk := task(n, fmt.Sprintf("ctx_%d", n%4), a2a.TaskStateSubmitted)
		all = append(all, tk)
		mustCreate(t, s, tk)
	}
	idsIn := []a2a.TaskID{all[7].ID, "tsk_unknown", all[3].ID, all[7].ID, all[40].ID, "bad\x00id"}
	now := epoch.Add(2 * time.Hour)
	ended, err := s.EndAll(ctx, idsIn, a2a.TaskStateCanceled, "the member stopped", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []a2a.TaskID{all[7].ID, all[3].ID, all[40].ID}; !slices.Equal(ended, want) {
		t.Fatalf("EndAll = %v, want %v", ended, want)
	}
	for _, n := range []int{7, 3, 40} {
		got, err := s.Get(ctx, all[n].ID)
		if err != nil {
			t.Fatal(err)
		}
		st := got.Status
		if st.State != a2a.TaskStateCanceled || !st.Timestamp.Equal(now) || st.Message == nil ||
			*st.Message.Parts[0].Text != "the member stopped" || st.Message.ContextID != all[n].ContextID || st.Message.TaskID != all[n].ID {
			t.Errorf("ended %d: %+v", n, st)
		}
		got.Status = all[n].Status
		a, _ := json.Marshal(all[n])
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Errorf("EndAll changed more than the status of %d", n)
		}
	}
	if got, _ := s.Get(ctx, all[8].ID); got.Status.State != a2a.TaskStateSubmitted {
		t.Error("EndAll ended a task it was not given")
	}
	// Without text: no message.
	if ended, err := s.EndAll(ctx, []a2a.TaskID{all[9].ID}, a2a.TaskStateFailed, "", now); err != nil || len(ended) != 1 {
		t.Fatal(ended, err)
	}
	if got, _ := s.Get(ctx, all[9].ID); got.Status.Message != nil || got.Status.State != a2a.TaskStateFailed {
		t.Errorf("EndAll without text: %+v", got.Status)
	}
	if v := version(t, connect(t, dsn), all[7].ID); v != 2 {
		t.Errorf("version after EndAll = %d", v)
	}
	page, err := s.ListInScope(ctx, store.ListQuery{State: a2a.TaskStateCanceled, PageSize: 10}, store.OperatorScope())
	if err != nil || page.Total != 3 {
		t.Errorf("canceled tasks listed: %d, %v", page.Total, err)
	}
	if ended, err := s.EndAll(ctx, nil, a2a.TaskStateFailed, "x", now); err != nil || ended != nil {
		t.Errorf("EndAll of none = %v, %v", ended, err)
	}
}

// TestEndAllMany: EndAll of thousands of tasks, with writes of other tasks in the same moment.
func TestEndAllMany(t *testing.T) {
	s, _ := open(t, Config{})
	ctx := t.Context()
	const n = 3000
	tasks := make([]*a2a.Task, n)
	idsIn := make([]a2a.TaskID, n)
	for i := range n {
		tasks[i] = task(i, "ctx", a2a.TaskStateSubmitted)
		idsIn[i] = tasks[i].ID
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if err := s.Create(ctx, tasks[i]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	start := time.Now()
	var other sync.WaitGroup
	other.Go(func() { mustCreate(t, s, task(n+1, "ctx", a2a.TaskStateSubmitted)) })
	ended, err := s.EndAll(ctx, idsIn, a2a.TaskStateCanceled, "stopped", epoch)
	other.Wait()
	if err != nil || len(ended) != n {
		t.Fatalf("EndAll: %d, %v", len(ended), err)
	}
	t.Logf("EndAll of %d tasks: %v", n, time.Since(start))
	page, err := s.ListInScope(ctx, store.ListQuery{State: a2a.TaskStateCanceled, PageSize: 1}, store.OperatorScope())
	if err != nil || page.Total != n {
		t.Errorf("canceled: %d, %v", page.Total, err)
	}
}

// TestPages: pages across many tasks, newest first, with filters, totals, a page bounded by bytes, and
// tokens that stay good while tasks are added and refused for another filter.
func TestPages(t *testing.T) {
	s, _ := open(t, Config{})
	ctx := t.Context()
	const n = 600
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				st := a2a.TaskStateCompleted
				if i%3 == 0 {
					st = a2a.TaskStateWorking
				}
				tk := task(i, fmt.Sprintf("ctx_%d", i%5), st)
				if i%7 == 0 {
					tk.Metadata = map[string]any{ids.Meta: map[string]any{string(ids.MetaCaller): "alpha", "origin": "peer"}}
				}
				if err := s.Create(ctx, tk); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Creation order is the writers' interleaving: the expected order is the database's own.
	all, err := s.ListInScope(ctx, store.ListQuery{PageSize: n + 10}, store.OperatorScope())
	if err != nil || len(all.Tasks) != n || all.Total != n || all.NextPageToken != "" {
		t.Fatalf("one page of all: %d tasks, total %d, %q, %v", len(all.Tasks), all.Total, all.NextPageToken, err)
	}
	matches := func(q store.ListQuery, tk *a2a.Task) bool {
		return (q.ContextID == "" || tk.ContextID == q.ContextID) && (q.State == "" || tk.Status.State == q.State) &&
			(q.After.IsZero() || tk.Status.Timestamp.UnixMilli() > q.After.UnixMilli())
	}
	for round, q := range []store.ListQuery{
		{PageSize: 37},
		{PageSize: 50, ContextID: "ctx_2"},
		{PageSize: 9, State: a2a.TaskStateWorking},
		{PageSize: 11, After: epoch.Add(300*time.Second + 500*time.Millisecond)},
		{PageSize: 13, ContextID: "ctx_1", State: a2a.TaskStateCompleted, After: epoch.Add(100 * time.Second)},
	} {
		all, err := s.ListInScope(ctx, store.ListQuery{PageSize: 2 * n}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		var want []a2a.TaskID
		for _, tk := range all.Tasks {
			if matches(q, tk) {
				want = append(want, tk.ID)
			}
		}
		wantTotal := len(want)
		var got []a2a.TaskID
		pages := 0
		for {
			page, err := s.ListInScope(ctx, q, store.OperatorScope())
			if err != nil {
				t.Fatal(err)
			}
			if page.Total != wantTotal {
				t.Errorf("%+v: total %d, want %d", q, page.Total, wantTotal)
			}
			for _, tk := range page.Tasks {
				got = append(got, tk.ID)
			}
			pages++
			if pages == 2 {
				// A task added between pages does not shift the pages after it.
				added := task(10000+round, q.ContextID, a2a.TaskStateWorking)
				mustCreate(t, s, added)
				if matches(q, added) {
					wantTotal++
				}
			}
			if page.NextPageToken == "" {
				break
			}
			q.PageToken = page.NextPageToken
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: got %d tasks, want %d (same number, other order: %v)", q, len(got), len(want), len(got) == len(want))
		}
		// A token is refused for another filter.
		if q.PageToken != "" {
			other := q
			other.ContextID = "ctx_other"
			if _, err := s.ListInScope(ctx, other, store.OperatorScope()); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("a token for another filter: %v", err)
			}
		}
	}
	// A peer sees what it sent, and the zero scope nothing.
	page, err := s.ListInScope(ctx, store.ListQuery{PageSize: 1000}, store.PeerScope("alpha"))
	if err != nil || page.Total != (n+6)/7 || len(page.Tasks) != page.Total {
		t.Errorf("alpha's tasks: %d of %d, %v", len(page.Tasks), page.Total, err)
	}
	if page, err := s.ListInScope(ctx, store.ListQuery{PageSize: 10}, store.Scope{}); err != nil || page.Total != 0 || len(page.Tasks) != 0 {
		t.Errorf("zero scope: %+v, %v", page, err)
	}
	if _, err := s.ListInScope(ctx, store.ListQuery{PageSize: 10, PageToken: "garbage"}, store.OperatorScope()); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("a garbage token: %v", err)
	}
}

// TestPageBytes: a page ends once it holds 4 MiB of task JSON.
func TestPageBytes(t *testing.T) {
	s, _ := open(t, Config{})
	big := strings.Repeat("x", 1<<20+100)
	for n := range 10 {
		tk := task(n, "ctx", a2a.TaskStateCompleted)
		tk.History[0].Parts = []a2a.Part{a2a.TextPart(big)}
		mustCreate(t, s, tk)
	}
	page, err := s.ListInScope(t.Context(), store.ListQuery{PageSize: 10}, store.OperatorScope())
	if err != nil || len(page.Tasks) != 4 || page.NextPageToken == "" || page.Total != 10 {
		t.Fatalf("page of 1 MiB tasks: %d tasks, %q, total %d, %v", len(page.Tasks), page.NextPageToken, page.Total, err)
	}
	if page.Tasks[0].ID != task(9, "", "").ID {
		t.Errorf("first task %s", page.Tasks[0].ID)
	}
}

// TestRetention: ended tasks older than MaxAge go, then the oldest ended beyond MaxTasks, rejected
// first; unfinished tasks stay; Removed hears of each; the sweeper runs by itself after a burst.
func TestRetention(t *testing.T) {
	now := epoch.Add(30 * 24 * time.Hour)
	var mu sync.Mutex
	var removed []a2a.TaskID
	s, _ := open(t, Config{
		Retention: roster.Retention{MaxAge: 24 * time.Hour, MaxTasks: 5},
		Now:       func() time.Time { return now },
		Removed: func(ids []a2a.TaskID) {
			mu.Lock()
			removed = append(removed, ids...)
			mu.Unlock()
		},
	})
	ctx := t.Context()
	recent := func(n int, st a2a.TaskState) *a2a.Task {
		tk := task(n, "ctx", st)
		tk.Status.Timestamp = a2a.NewTimestamp(now.Add(-time.Duration(100-n) * time.Minute))
		return tk
	}
	old := []*a2a.Task{task(1, "ctx", a2a.TaskStateCompleted), task(2, "ctx", a2a.TaskStateFailed)}
	noTS := task(3, "ctx", a2a.TaskStateCanceled)
	noTS.Status.Timestamp = nil // created by the store's clock: now, so kept by age
	oldWorking := task(4, "ctx", a2a.TaskStateWorking)
	mustCreate(t, s, append(old, noTS, oldWorking)...)
	var kept []*a2a.Task
	for n := 10; n < 18; n++ {
		st := a2a.TaskStateCompleted
		if n == 15 || n == 16 {
			st = a2a.TaskStateRejected
		}
		kept = append(kept, recent(n, st))
	}
	mustCreate(t, s, kept...)
	got, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// By age: 1, 2. By count: 9 ended remain (noTS and 10..17), 5 kept: the rejected 15 and 16, then the
	// oldest: noTS (created now, but first by seq), 10.
	wantGone := []a2a.TaskID{old[0].ID, old[1].ID, kept[5].ID, kept[6].ID, noTS.ID, kept[0].ID}
	if got != len(wantGone) {
		t.Errorf("Sweep removed %d, want %d", got, len(wantGone))
	}
	mu.Lock()
	slices.Sort(removed)
	slices.Sort(wantGone)
	if !slices.Equal(removed, wantGone) {
		t.Errorf("Removed heard %v, want %v", removed, wantGone)
	}
	mu.Unlock()
	for _, id := range wantGone {
		if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s not removed: %v", id, err)
		}
	}
	if _, err := s.Get(ctx, oldWorking.ID); err != nil {
		t.Errorf("an unfinished task was removed: %v", err)
	}
	if n, err := s.Sweep(ctx); n != 0 || err != nil {
		t.Errorf("second Sweep = %d, %v", n, err)
	}

	// A burst of sweepAfter new ended tasks wakes the sweeper.
	for n := 200; n < 200+int(s.sweepAfter()); n++ {
		mustCreate(t, s, withID(recent(n%100, a2a.TaskStateCompleted), n))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := s.ListInScope(ctx, store.ListQuery{State: a2a.TaskStateCompleted, PageSize: 1}, store.OperatorScope())
		if err != nil {
			t.Fatal(err)
		}
		if page.Total <= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweeper did not run after a burst: %d completed tasks", page.Total)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withID is tk with the id of task n.
func withID(tk *a2a.Task, n int) *a2a.Task {
	tk.ID = task(n, "", "").ID
	return tk
}

// TestRestart: the database restarts under a working store; a write may fail while it is down, the next
// one after it is up again succeeds (the pool reconnects), and nothing acknowledged is lost.
func TestRestart(t *testing.T) {
	s, _ := open(t, Config{})
	ctx := t.Context()
	var acked []*a2a.Task
	for n := range 20 {
		tk := task(n, "ctx", a2a.TaskStateSubmitted)
		mustCreate(t, s, tk)
		acked = append(acked, tk)
	}
	pgtest.Start(t).Restart(t)
	n := 100
	write := func() error {
		n++
		tk := task(n, "ctx", a2a.TaskStateSubmitted)
		err := s.Create(ctx, tk)
		if err == nil {
			acked = append(acked, tk)
		}
		return err
	}
	if err := write(); err != nil {
		t.Logf("the first write after the restart: %v", err)
		if err := write(); err != nil {
			t.Fatalf("the second write after the restart: %v", err)
		}
	}

	// Writers at work while the database restarts under them: whatever was acknowledged is kept, and
	// once it is back each writer's next write succeeds.
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	failures := 0
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tk := task(1000+w*10000+i, "ctx", a2a.TaskStateSubmitted)
				err := s.Create(ctx, tk)
				mu.Lock()
				if err == nil {
					acked = append(acked, tk)
				} else {
					failures++
					if !strings.Contains(err.Error(), "is unreachable") {
						t.Errorf("a write failed without saying why: %v", err)
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	pgtest.Start(t).Restart(t)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d writes acknowledged, %d failed during the restart", len(acked), failures)
	for w := range 8 {
		if err := s.Create(ctx, task(900000+w, "ctx", a2a.TaskStateSubmitted)); err != nil {
			t.Errorf("a write after the restart: %v", err)
		}
	}
	got, err := s.GetAll(ctx, taskIDsOf(acked))
	if err != nil || len(got) != len(acked) {
		t.Errorf("acknowledged tasks kept: %d of %d, %v", len(got), len(acked), err)
	}
}

func taskIDsOf(ts []*a2a.Task) []a2a.TaskID {
	out := make([]a2a.TaskID, len(ts))
	for i, tk := range ts {
		out[i] = tk.ID
	}
	return out
}

// TestUnreachable: while the database is down, a write fails saying so (without the password), and
// the store keeps running: once the database is back the next write succeeds, and what was
// acknowledged before is there.
func TestUnreachable(t *testing.T) {
	dsn := database(t) + " password=s3cr3t-pw"
	s, _ := open(t, Config{}, dsn)
	ctx := t.Context()
	mustCreate(t, s, task(1, "ctx", a2a.TaskStateSubmitted))
	soonFailed := make(chan struct{}, 1)
	s.log = slogTo(func(msg string) {
		select {
		case soonFailed <- struct{}{}:
		default:
		}
	})
	pg := pgtest.Start(t)
	pg.Kill(t)
	started := false
	defer func() {
		if !started {
			pgtest.Start(t)
		}
	}()
	err := s.Create(ctx, task(2, "ctx", a2a.TaskStateSubmitted))
	if err == nil {
		t.Fatal("Create with the database down succeeded")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"the task store's database at " + socketDir(t, dsn), "is unreachable", "the member keeps running and retries on the next write"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cr3t-pw") {
		t.Errorf("error %q shows the password", msg)
	}
	// tsk_0002, whose Create failed, is not in the cache (tsk_0001 is, and is answered from it).
	if _, err := s.Get(ctx, "tsk_0002"); err == nil || !strings.Contains(err.Error(), "is unreachable") {
		t.Errorf("Get with the database down: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping with the database down succeeded")
	}
	s.UpdateSoon(task(1, "ctx", a2a.TaskStateWorking))
	select {
	case <-soonFailed:
	case <-time.After(10 * time.Second):
		t.Error("UpdateSoon's failure was not logged")
	}
	pgtest.Start(t)
	started = true
	if err := s.Create(ctx, task(3, "ctx", a2a.TaskStateSubmitted)); err != nil {
		t.Fatalf("the first write once the database is back: %v", err)
	}
	for _, id := range []a2a.TaskID{"tsk_0001", "tsk_0003"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("acknowledged %s: %v", id, err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		t.Error(err)
	}
}

// slogTo is a logger that calls f with each record's message and error.
func slogTo(f func(string)) *slog.Logger {
	return slog.New(funcHandler(f))
}

type funcHandler func(string)

func (h funcHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h funcHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	h(msg)
	return nil
}
func (h funcHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h funcHandler) WithGroup(string) slog.Handler      { return h }

// BenchmarkCreate is one Create at a time: the latency of a durable write.
func BenchmarkCreate(b *testing.B) {
	s, err := Open(b.Context(), pgtest.Start(b).NewDatabase(b), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	for b.Loop() {
		n++
		if err := s.Create(b.Context(), task(n, "ctx", a2a.TaskStateSubmitted)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateParallel is Creates from many goroutines: what the group commit shares.
func BenchmarkCreateParallel(b *testing.B) {
	s, err := Open(b.Context(), pgtest.Start(b).NewDatabase(b), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Int64
	b.SetParallelism(16)
	b.RunParallel(func(p *testing.PB) {
		for p.Next() {
			if err := s.Create(b.Context(), task(int(next.Add(1)), "ctx", a2a.TaskStateSubmitted)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestOneBadWriteFailsAlone: a statement that fails in the database (here a CHECK added behind the
// store's back) aborts its group's transaction; the group is written again write by write, so only that
// write fails and the others of its group are stored.
func TestOneBadWriteFailsAlone(t *testing.T) {
	s, dsn := open(t, Config{})
	ctx := t.Context()
	if _, err := connect(t, dsn).Exec(ctx, `ALTER TABLE tasks ADD CONSTRAINT no_poison CHECK (context_id <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 32)
		for i := range errs {
			wg.Go(func() {
				ctxID := "ctx"
				if i == 7 {
					ctxID = "poison"
				}
				errs[i] = s.Create(ctx, task(round*100+i, ctxID, a2a.TaskStateSubmitted))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if (err != nil) != (i == 7) {
				t.Errorf("round %d, write %d: %v", round, i, err)
			}
		}
		if !strings.Contains(fmt.Sprint(errs[7]), "no_poison") {
			t.Errorf("the bad write's error: %v", errs[7])
		}
	}
}

// database is a fresh database's address for tb; the test is skipped where PostgreSQL is absent.
func database(tb testing.TB) string {
	tb.Helper()
	return pgtest.Start(tb).NewDatabase(tb)
}

// socketDir is the directory of the Unix socket dsn names, as the store's errors name the server.
func socketDir(tb testing.TB, dsn string) string {
	tb.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg.Host
}

// BenchmarkBeside runs the store's two hot paths on both implementations in one run, so that their
// ratio comes from one machine at one moment (docs/task-store.md): Create from 16 writers at once (a
// door's acknowledgements, group-committed) and Get of a task written before 5,000 others (GetTask of an
// older task; SQLite's cache keeps the 4,096 newest, so the read reaches the file).
func BenchmarkBeside(b *testing.B) {
	stores := map[string]func(b *testing.B) store.Tasks{
		"sqlite": func(b *testing.B) store.Tasks {
			s, err := store.Open(filepath.Join(b.TempDir(), "tasks.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(b *testing.B) store.Tasks {
			s, err := Open(b.Context(), pgtest.Start(b).NewDatabase(b), Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run("create16/"+name, func(b *testing.B) {
			s := stores[name](b)
			var n atomic.Int64
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Create(context.Background(), task(int(n.Add(1)), "ctx", a2a.TaskStateSubmitted)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("get-old/"+name, func(b *testing.B) {
			s := stores[name](b)
			ctx := context.Background()
			if err := s.Create(ctx, task(1, "ctx", a2a.TaskStateCompleted)); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for w := range 16 { // 5,000 more, group-committed
				wg.Go(func() {
					for i := 2 + w; i <= 5001; i += 16 {
						if err := s.Create(ctx, task(i, "ctx", a2a.TaskStateCompleted)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			old := task(1, "ctx", a2a.TaskStateCompleted).ID
			for b.Loop() {
				if _, err := s.Get(ctx, old); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
