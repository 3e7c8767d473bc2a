package push

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	goleak.VerifyTestMain(m)
}

func TestAllowlist(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		url   string
		ok    bool
		says  string
	}{
		{nil, "https://hooks.example.com/x", false, "push.allow in this member's murmur.yaml lists no webhook host"},
		{[]string{"hooks.example.com"}, "https://hooks.example.com/x", true, ""},
		{[]string{"hooks.example.com"}, "https://evil.example.com/x", false, "host evil.example.com is not in push.allow"},
		{[]string{"*.example.com"}, "https://a.b.example.com/x", true, ""},
		{[]string{"*"}, "https://anything.example.org/x", true, ""},
		{[]string{"*"}, "http://127.0.0.1:9/x", false, "127.0.0.1 is a loopback, private or link-local address"},
		{[]string{"*"}, "http://169.254.169.254/latest", false, "link-local"},
		{[]string{"*"}, "http://10.1.2.3/x", false, "add 10.1.2.3 to push.allow"},
		{[]string{"127.0.0.1"}, "http://127.0.0.1:9/x", true, ""},
		{[]string{"10.0.0.0/8"}, "http://10.1.2.3/x", true, ""},
		{[]string{"::1"}, "http://[::1]:9/x", true, ""},
		{[]string{"*"}, "ftp://example.org/x", false, "not an http or https URL"},
		{[]string{"*"}, "https://user:pw@example.org/x", false, "no user:password@"},
		{[]string{"*"}, "/relative", false, "not an http or https URL"},
	} {
		a, err := NewAllowlist(tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.CheckURL(tc.url)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), tc.says))) {
			t.Errorf("allow %v, %s: %v; want ok=%v saying %q", tc.allow, tc.url, err, tc.ok, tc.says)
		}
	}
	// At connection time every address a name resolves to is checked: a wildcard or "*" never reaches a
	// loopback address; an exact name does.
	a, _ := NewAllowlist([]string{"*.example.com", "localhost", "*"})
	lo := netip.MustParseAddr("127.0.0.1")
	if err := a.checkAddr("rebind.example.com", lo); err == nil {
		t.Error("a wildcard name resolving to loopback was let through")
	}
	if err := a.checkAddr("localhost", lo); err != nil {
		t.Errorf("an exactly named host: %v", err)
	}
	if err := a.checkAddr("public.example.com", netip.MustParseAddr("93.184.216.34")); err != nil {
		t.Errorf("a public address: %v", err)
	}
}

// taskDB is a file with the task store's tasks table as the notifier reads it (id, task).
func taskDB(t *testing.T) (string, *sql.DB) { return taskDBAt(t) }

func taskDBAt(t testing.TB) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, task TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return path, db
}

func storeTask(t *testing.T, db *sql.DB, id string, state a2a.TaskState) {
	storeTaskB(t, db, id, state)
}

func storeTaskB(t testing.TB, db *sql.DB, id string, state a2a.TaskState) {
	t.Helper()
	body, _ := json.Marshal(a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx_1", Status: a2a.TaskStatus{State: state},
		History: []a2a.Message{{MessageID: "m", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("secret question")}}}})
	if _, err := db.Exec(`INSERT INTO tasks (id, task) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET task = excluded.task`, id, string(body)); err != nil {
		t.Fatal(err)
	}
}

// receiver is a webhook on loopback that fails its first `fail` posts with 503. With hold set, its
// first post says so on held and waits until hold is closed.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	fail int
	hits int
	got  []http.Header
	body []a2a.StreamResponse
	ch   chan a2a.TaskState

	hold, held chan struct{}
}

func newReceiver(t *testing.T, fail int) *receiver {
	return newHeldReceiver(t, fail, nil)
}

func newHeldReceiver(t *testing.T, fail int, hold chan struct{}) *receiver {
	r := &receiver{fail: fail, ch: make(chan a2a.TaskState, 100), hold: hold, held: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits++
		if r.hits == 1 && r.hold != nil {
			r.mu.Unlock()
			close(r.held)
			<-r.hold
			r.mu.Lock()
		}
		defer r.mu.Unlock()
		if r.hits <= r.fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var sr a2a.StreamResponse
		json.Unmarshal(b, &sr)
		r.got = append(r.got, req.Header.Clone())
		r.body = append(r.body, sr)
		r.ch <- sr.Task.Status.State
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) next(t *testing.T) a2a.TaskState {
	t.Helper()
	select {
	case s := <-r.ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery within 30s")
	}
	return ""
}

func open(t testing.TB, path string, cfg Config) *Notifier {
	t.Helper()
	cfg.Path = path
	if cfg.Allow.raw == nil {
		cfg.Allow, _ = NewAllowlist([]string{"127.0.0.1"})
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeliveryRetriesThenSucceeds(t *testing.T) {
	path, db := taskDB(t)
	storeTask(t, db, "tsk_1", a2a.TaskStateWorking)
	r := newReceiver(t, 2)
	var outcomes []string
	var omu sync.Mutex
	n := open(t, path, Config{Backoff: time.Millisecond, Delivered: func(o string) { omu.Lock(); outcomes = append(outcomes, o); omu.Unlock() }})
	defer n.Close()
	ctx := context.Background()
	c, err := n.Create(ctx, "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: r.srv.URL + "/hook", Token: "tok-1",
		Authentication: &a2a.AuthenticationInfo{Scheme: "Bearer", Credentials: "cred-1"}})
	if err != nil || !strings.HasPrefix(c.ID, "pnc_") {
		t.Fatal(c, err)
	}
	if s := r.next(t); s != a2a.TaskStateWorking {
		t.Fatalf("first delivery %s, want the task's current WORKING", s)
	}
	storeTask(t, db, "tsk_1", a2a.TaskStateCompleted)
	n.Changed(events.Change{TaskID: "tsk_1", State: a2a.TaskStateCompleted})
	if s := r.next(t); s != a2a.TaskStateCompleted {
		t.Fatalf("second delivery %s, want COMPLETED", s)
	}
	waitUntil(t, "the outbox emptied", func() bool { return waiting(t, db) == 0 })
	n.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hits != 4 {
		t.Errorf("the webhook was posted %d times, want 2 failures + 2 deliveries", r.hits)
	}
	h := r.got[0]
	if h.Get("A2A-Notification-Token") != "tok-1" || h.Get("Authorization") != "Bearer cred-1" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	if r.body[0].Task == nil || r.body[0].Task.ID != "tsk_1" || r.body[0].Task.History != nil {
		t.Errorf("body %+v: want the task, without its history", r.body[0])
	}
	omu.Lock()
	if strings.Join(outcomes, ",") != "retry,retry,ok,ok" {
		t.Errorf("outcomes %v", outcomes)
	}
	omu.Unlock()
}

// TestPendingDeliverySurvivesRestart: the member stops after a change was stored and before it was
// delivered; the next Open delivers the change waiting in the outbox and the one stored without being
// reported to the notifier, in order.
func TestPendingDeliverySurvivesRestart(t *testing.T) {
	path, db := taskDB(t)
	storeTask(t, db, "tsk_1", a2a.TaskStateWorking)
	down := newReceiver(t, 1000)
	n := open(t, path, Config{Backoff: time.Hour})
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{ID: "mine", TaskID: "tsk_1", URL: down.srv.URL}); err != nil {
		t.Fatal(err)
	}
	storeTask(t, db, "tsk_1", a2a.TaskStateCompleted) // stored; the notifier is never told
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	up := newReceiver(t, 0)
	if _, err := db.Exec(`UPDATE push_configs SET config = json_set(config, '$.url', ?)`, up.srv.URL); err != nil {
		t.Fatal(err) // the same webhook, now answering (a new port on loopback)
	}
	n = open(t, path, Config{})
	defer n.Close()
	if s := up.next(t); s != a2a.TaskStateWorking {
		t.Fatalf("after the restart the webhook got %s first, want the WORKING that was waiting", s)
	}
	if s := up.next(t); s != a2a.TaskStateCompleted {
		t.Fatalf("after the restart the webhook got %s, want COMPLETED", s)
	}
	got, err := n.List(context.Background(), "tsk_1")
	if err != nil || len(got) != 1 || got[0].ID != "mine" {
		t.Errorf("List: %+v %v", got, err)
	}
	if _, err := n.Get(context.Background(), "tsk_1", "other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown config: %v", err)
	}
	n.Delete(context.Background(), "tsk_1", "mine")
	if got, _ := n.List(context.Background(), "tsk_1"); len(got) != 0 {
		t.Errorf("after Delete: %+v", got)
	}
}

func TestRefusedWebhooks(t *testing.T) {
	path, db := taskDB(t)
	storeTask(t, db, "tsk_1", a2a.TaskStateWorking)
	allow, _ := NewAllowlist([]string{"hooks.example.com", "*"})
	n := open(t, path, Config{Allow: allow})
	defer n.Close()
	_, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: "http://127.0.0.1:9/hook"})
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "add 127.0.0.1 to push.allow") {
		t.Errorf("a loopback webhook not named in push.allow: %v", err)
	}
	for i := range DefaultConfigsPerTask {
		if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{ID: string(rune('a' + i)), TaskID: "tsk_1", URL: "https://hooks.example.com/x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: "https://hooks.example.com/x"}); !errors.Is(err, ErrTooMany) {
		t.Errorf("config %d: %v", DefaultConfigsPerTask+1, err)
	}
	// Replacing one by its id is not one more.
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{ID: "a", TaskID: "tsk_1", URL: "https://hooks.example.com/y"}); err != nil {
		t.Errorf("replacing a config: %v", err)
	}
}
