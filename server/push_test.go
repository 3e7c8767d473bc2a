package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/roster"
)

// webhook is a push receiver on loopback. While down, or for its first failFirst posts, it answers 503.
type webhook struct {
	srv       *httptest.Server
	mu        sync.Mutex
	down      bool
	failFirst int
	posts     int
	headers   []http.Header
	got       chan a2a.Task
}

func newWebhook(t testing.TB, failFirst int) *webhook {
	w := &webhook{failFirst: failFirst, got: make(chan a2a.Task, 100)}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.posts++
		if w.down || w.posts <= w.failFirst {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var sr a2a.StreamResponse
		if err := json.Unmarshal(body, &sr); err != nil || sr.Task == nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.headers = append(w.headers, r.Header.Clone())
		w.got <- *sr.Task
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhook) setDown(down bool) { w.mu.Lock(); w.down = down; w.mu.Unlock() }

// until waits for a delivery of the task in state want, and returns the states delivered on the way.
func (w *webhook) until(t *testing.T, want a2a.TaskState) []a2a.TaskState {
	t.Helper()
	var seen []a2a.TaskState
	for {
		select {
		case task := <-w.got:
			seen = append(seen, task.Status.State)
			if task.Status.State == want {
				return seen
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no delivery of %s within 30s; delivered: %v", want, seen)
		}
	}
}

const pushWorker = "name: worker\npush: {allow: [127.0.0.1]}\nscript:\n  command: [sh, -c, 'read -r l; while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; echo \"done: $l\"']\n"

// pushFormation writes a one-member formation under root (once) and starts it on root's data directory.
func pushFormation(t *testing.T, root string, backoff time.Duration) *Formation {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "roster.yaml")); err != nil {
		os.MkdirAll(filepath.Join(root, "worker"), 0o755)
		os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n"), 0o644)
		os.WriteFile(filepath.Join(root, "worker", "murmur.yaml"), []byte(pushWorker), 0o644)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
		Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test", PushBackoff: backoff, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func shutdown(t *testing.T, f *Formation) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestPushNotifications: configs made, read, listed and deleted with a2a-go's client; a receiver that
// fails twice gets the task's state once it answers, then every later state; refused webhooks.
func TestPushNotifications(t *testing.T) {
	root := t.TempDir()
	f := pushFormation(t, root, time.Millisecond)
	defer shutdown(t, f)
	defer os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	hook := newWebhook(t, 2)
	c := a2agoClient(t, f.Members[0].URL, "op")
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("job"), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2ago.Task)
	cfg, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task.ID, URL: hook.srv.URL + "/hook", Token: "tok",
		Auth: &a2ago.PushAuthInfo{Scheme: "Bearer", Credentials: "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID == "" || cfg.URL != hook.srv.URL+"/hook" || cfg.TaskID != task.ID {
		t.Errorf("created %+v", cfg)
	}
	for _, s := range hook.until(t, a2a.TaskStateWorking) {
		if s != a2a.TaskStateSubmitted && s != a2a.TaskStateWorking {
			t.Errorf("before the task worked the webhook got %s", s)
		}
	}
	os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	hook.until(t, a2a.TaskStateCompleted)
	hook.mu.Lock()
	h := hook.headers[0]
	posts := hook.posts
	hook.mu.Unlock()
	if h.Get("A2A-Notification-Token") != "tok" || h.Get("Authorization") != "Bearer secret" {
		t.Errorf("delivery headers %v", h)
	}
	if posts < 4 {
		t.Errorf("%d posts: want the 2 failures, then WORKING and COMPLETED", posts)
	}

	got, err := c.GetTaskPushConfig(ctx, &a2ago.GetTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID})
	if err != nil || got.URL != cfg.URL || got.Token != "tok" {
		t.Errorf("Get: %+v %v", got, err)
	}
	list, err := c.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].ID != cfg.ID {
		t.Errorf("List: %+v %v", list, err)
	}
	if err := c.DeleteTaskPushConfig(ctx, &a2ago.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID}); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if list, _ := c.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID}); len(list) != 0 {
		t.Errorf("after Delete: %+v", list)
	}
	if _, err := c.GetTaskPushConfig(ctx, &a2ago.GetTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID}); err == nil || !strings.Contains(err.Error(), "has no push notification config") {
		t.Errorf("Get of a deleted config: %v", err)
	}

	// Refused webhooks: an address push.allow does not name (loopback 127.0.0.2, private 10.0.0.1), a
	// task that does not exist; nothing is stored.
	for _, u := range []string{"http://127.0.0.2:9/hook", "http://10.0.0.1/hook", "https://hooks.example.com/x"} {
		_, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task.ID, URL: u})
		if err == nil || !strings.Contains(err.Error(), "push.allow") {
			t.Errorf("webhook %s: %v, want a refusal naming push.allow", u, err)
		}
	}
	if _, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: "tsk_nope", URL: hook.srv.URL}); err == nil {
		t.Error("a config for an unknown task was accepted")
	}
	if list, _ := c.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID}); len(list) != 0 {
		t.Errorf("refused configs were stored: %+v", list)
	}
	// A webhook given with the message: the new task's states are delivered.
	res, err = c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("second"),
		Config: &a2ago.SendMessageConfig{PushConfig: &a2ago.PushConfig{URL: hook.srv.URL + "/again"}}})
	if err != nil {
		t.Fatal(err)
	}
	hook.until(t, a2a.TaskStateCompleted)
	if _, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("third"),
		Config: &a2ago.SendMessageConfig{PushConfig: &a2ago.PushConfig{URL: "http://10.0.0.1/x"}}}); err == nil {
		t.Error("a message with a refused webhook was taken")
	}
}

// TestPushDeliveredAfterRestart: the member stops after a task's changes were stored and before the
// webhook took them; once the member is back, each change is delivered, in order, ending with the end.
func TestPushDeliveredAfterRestart(t *testing.T) {
	root := t.TempDir()
	hook := newWebhook(t, 0)
	hook.setDown(true)
	f := pushFormation(t, root, time.Hour) // a failed delivery waits an hour: only a restart brings it
	c := a2agoClient(t, f.Members[0].URL, "op")
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("job"), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2ago.Task).ID
	if _, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: id, URL: hook.srv.URL}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	waitFor(t, func() bool {
		task, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
		return err == nil && task.Status.State == a2ago.TaskStateCompleted
	})
	shutdown(t, f)
	hook.setDown(false)
	f = pushFormation(t, root, time.Hour)
	defer shutdown(t, f)
	got := hook.until(t, a2a.TaskStateCompleted)
	if got[0] != a2a.TaskStateSubmitted && got[0] != a2a.TaskStateWorking {
		t.Errorf("after the restart the webhook got %v first, want the state the config was made in", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] == a2a.TaskStateSubmitted || (got[i-1] == a2a.TaskStateCompleted) {
			t.Errorf("after the restart the webhook got %v: out of order", got)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
	}
}

// TestPushConfigBounds: with push.max_configs_per_task: 2 and push.max_configs_per_caller: 3 in the
// worker's murmur.yaml, a peer's third config of a task and its fourth config in all are refused with
// -32602 saying which bound and what to do, through CreateTaskPushNotificationConfig and through
// SendMessage, which then starts no task; the operator's configs are its own.
func TestPushConfigBounds(t *testing.T) {
	root := t.TempDir()
	for p, body := range map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
			"  - {name: caller, capsule: ./caller, listen: '127.0.0.1:0'}\nreach:\n  - {from: caller, to: [worker]}\n",
		"worker/murmur.yaml": strings.Replace(fairWorker, "push: {allow: [127.0.0.1]}",
			"push: {allow: [127.0.0.1], max_configs_per_task: 2, max_configs_per_caller: 3}", 1),
		"caller/murmur.yaml": "name: caller\nscript: {command: [cat]}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(body), 0o644)
	}
	f := pushFormation(t, root, time.Hour) // a failed delivery waits: every config keeps a change waiting
	defer shutdown(t, f)
	down := newWebhook(t, 0)
	down.setDown(true)
	ctx := context.Background()
	op := a2agoClient(t, f.Members[0].URL, "op")
	peer := a2agoClient(t, f.Members[0].URL, peercred.NewKey("fm", "f").Credential("caller", peercred.Trusted))
	create := func(c *a2aclient.Client, task a2ago.TaskID) error {
		_, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task, URL: down.srv.URL})
		return err
	}
	one, two := finishedTask(t, peer, "one"), finishedTask(t, peer, "two")
	for _, task := range []a2ago.TaskID{one, one, two} {
		if err := create(peer, task); err != nil {
			t.Fatal(err)
		}
	}
	err := create(peer, one)
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "has 2 push notification configs") ||
		!strings.Contains(err.Error(), "push.max_configs_per_task") || !strings.Contains(err.Error(), "delete one") {
		t.Errorf("a third config of a task: %v, want invalid params naming push.max_configs_per_task and what to do", err)
	}
	err = create(peer, two)
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "you have 3 push notification configs") ||
		!strings.Contains(err.Error(), "push.max_configs_per_caller") || !strings.Contains(err.Error(), "delete one") {
		t.Errorf("a fourth config of the peer's: %v, want invalid params naming push.max_configs_per_caller and what to do", err)
	}
	before, err := peer.ListTasks(ctx, &a2ago.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = peer.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("three"),
		Config: &a2ago.SendMessageConfig{PushConfig: &a2ago.PushConfig{URL: down.srv.URL}}})
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "push.max_configs_per_caller") {
		t.Errorf("a message with a fourth config of the peer's: %v, want invalid params naming push.max_configs_per_caller", err)
	}
	if after, err := peer.ListTasks(ctx, &a2ago.ListTasksRequest{}); err != nil || len(after.Tasks) != len(before.Tasks) {
		t.Errorf("the refused message started a task: %d tasks before, %d after (%v)", len(before.Tasks), len(after.Tasks), err)
	}
	if err := create(op, two); err != nil {
		t.Errorf("the operator's config while the peer is at its bound: %v", err)
	}
	// Deleting one of its configs makes room for the peer again.
	list, err := peer.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: one})
	if err != nil || len(list) != 2 {
		t.Fatalf("the peer's configs of its first task: %v %v", list, err)
	}
	if err := peer.DeleteTaskPushConfig(ctx, &a2ago.DeleteTaskPushConfigRequest{TaskID: one, ID: list[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := create(peer, one); err != nil {
		t.Errorf("a config of the peer's after it deleted one: %v", err)
	}
}

// TestPushOfAFastTaskStartsAtSubmitted: a push config a SendMessage carries is registered before its task
// can start, so even a task that ends at once is posted SUBMITTED, WORKING and COMPLETED, in that order
// (before, the config was made after the task had run, and its webhook got COMPLETED alone).
func TestPushOfAFastTaskStartsAtSubmitted(t *testing.T) {
	root := t.TempDir()
	f := pushFormation(t, root, time.Millisecond)
	defer shutdown(t, f)
	os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644) // the worker answers at once
	c := a2agoClient(t, f.Members[0].URL, "op")
	for i := range 5 {
		hook := newWebhook(t, 0)
		if _, err := c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("job"),
			Config: &a2ago.SendMessageConfig{PushConfig: &a2ago.PushConfig{URL: hook.srv.URL + "/hook"}}}); err != nil {
			t.Fatal(err)
		}
		got := hook.until(t, a2a.TaskStateCompleted)
		if want := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}; !slices.Equal(got, want) {
			t.Fatalf("task %d: the webhook got %v, want %v", i, got, want)
		}
	}
}
