package push

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// hangingReceiver is a webhook on loopback that never answers: each post is held open until the
// notifier drops it or the test ends. It counts the posts it holds, and the most it held at once.
type hangingReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	now  int
	most int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{}
	release := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.now++
		h.most = max(h.most, h.now)
		h.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}))
	t.Cleanup(func() {
		close(release)
		h.srv.Close()
	})
	return h
}

// held returns the posts held now and the most held at once.
func (h *hangingReceiver) held() (now, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now, h.most
}

// TestHangingWebhooksHoldTheirCallersSlotsOnly: a peer's 24 configs post to two webhooks that never
// answer (and are given an hour to); the operator's config, made after them, is delivered. Each hanging
// host holds PerReceiver of the peer's posts, never more: PerCaller in all. With one queue for every
// caller, the peer's hanging posts held every slot and nothing else was ever delivered.
func TestHangingWebhooksHoldTheirCallersSlotsOnly(t *testing.T) {
	path, db := taskDB(t)
	a, b := newHangingReceiver(t), newHangingReceiver(t)
	good := newReceiver(t, 0)
	n := open(t, path, Config{Timeout: time.Hour})
	defer n.Close()
	ctx := context.Background()
	for i := range 24 {
		task := fmt.Sprintf("tsk_peer_%d", i/DefaultConfigsPerTask)
		storeTask(t, db, task, a2a.TaskStateCompleted)
		to := a
		if i%2 == 1 {
			to = b
		}
		if _, err := n.Create(ctx, "peer", a2a.TaskPushNotificationConfig{TaskID: a2a.TaskID(task), URL: fmt.Sprintf("%s/%d", to.srv.URL, i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the peer's posts to both hanging webhooks", func() bool {
		na, _ := a.held()
		nb, _ := b.held()
		return na+nb == PerCaller
	})
	storeTask(t, db, "tsk_op", a2a.TaskStateWorking)
	if _, err := n.Create(ctx, "", a2a.TaskPushNotificationConfig{TaskID: "tsk_op", URL: good.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if s := good.next(t); s != a2a.TaskStateWorking {
		t.Errorf("the operator's webhook got %s, want WORKING", s)
	}
	_, mostA := a.held()
	_, mostB := b.held()
	if mostA != PerReceiver || mostB != PerReceiver {
		t.Errorf("the hanging webhooks held %d and %d posts at once, want %d each (PerReceiver)", mostA, mostB, PerReceiver)
	}
}

// TestHangingWebhooksLeaveTheCallersOtherHost: while one host of a caller's hangs with more configs
// than the caller has slots, the caller's config to another host is still delivered.
func TestHangingWebhooksLeaveTheCallersOtherHost(t *testing.T) {
	path, db := taskDB(t)
	hang := newHangingReceiver(t)
	good := newReceiver(t, 0)
	n := open(t, path, Config{Timeout: time.Hour})
	defer n.Close()
	ctx := context.Background()
	for i := range 2 * PerCaller {
		task := fmt.Sprintf("tsk_%d", i/DefaultConfigsPerTask)
		storeTask(t, db, task, a2a.TaskStateCompleted)
		if _, err := n.Create(ctx, "", a2a.TaskPushNotificationConfig{TaskID: a2a.TaskID(task), URL: fmt.Sprintf("%s/%d", hang.srv.URL, i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the hanging webhook's posts", func() bool { now, _ := hang.held(); return now == PerReceiver })
	storeTask(t, db, "tsk_good", a2a.TaskStateWorking)
	if _, err := n.Create(ctx, "", a2a.TaskPushNotificationConfig{TaskID: "tsk_good", URL: good.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if s := good.next(t); s != a2a.TaskStateWorking {
		t.Errorf("the other host got %s, want WORKING", s)
	}
}

// TestConfigBounds: past ConfigsPerTask configs of a task, or ConfigsPerCaller configs of one caller on
// tasks that have not ended or with changes waiting, Create fails saying what the bound is and what to
// do, and CheckRoom tells the second before; replacing a config by its id is not one more; another
// caller's configs do not count; a config whose task ended and whose changes were all delivered no
// longer counts.
func TestConfigBounds(t *testing.T) {
	path, db := taskDB(t)
	r := newReceiver(t, 0)
	n := open(t, path, Config{ConfigsPerTask: 2, ConfigsPerCaller: 3})
	defer n.Close()
	ctx := context.Background()
	create := func(caller, task, id string) error {
		_, err := n.Create(ctx, caller, a2a.TaskPushNotificationConfig{ID: id, TaskID: a2a.TaskID(task), URL: r.srv.URL})
		return err
	}
	for _, task := range []string{"tsk_1", "tsk_2", "tsk_3"} {
		storeTask(t, db, task, a2a.TaskStateWorking)
	}
	for _, c := range [][2]string{{"tsk_1", "a"}, {"tsk_1", "b"}} {
		if err := create("peer", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	err := create("peer", "tsk_1", "c")
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "task tsk_1 has 2 push notification configs") || !strings.Contains(err.Error(), "delete one") {
		t.Errorf("a third config of a task bound to 2: %v", err)
	}
	if err := create("peer", "tsk_1", "a"); err != nil {
		t.Errorf("replacing a config of a full task: %v", err)
	}
	if err := create("peer", "tsk_2", "a"); err != nil {
		t.Fatal(err)
	}
	err = create("peer", "tsk_3", "a")
	if !errors.Is(err, ErrTooManyOfCaller) || !strings.Contains(err.Error(), "you have 3 push notification configs") ||
		!strings.Contains(err.Error(), "push.max_configs_per_caller") || !strings.Contains(err.Error(), "delete one with DeleteTaskPushNotificationConfig") {
		t.Errorf("a fourth config of a caller bound to 3: %v", err)
	}
	if err := n.CheckRoom(ctx, "peer"); !errors.Is(err, ErrTooManyOfCaller) {
		t.Errorf("CheckRoom of a caller at its bound: %v", err)
	}
	if err := n.CheckRoom(ctx, "other"); err != nil {
		t.Errorf("CheckRoom of another caller: %v", err)
	}
	if err := create("peer", "tsk_2", "a"); err != nil {
		t.Errorf("replacing a config of a caller at its bound: %v", err)
	}
	if err := create("", "tsk_3", "a"); err != nil {
		t.Errorf("the operator's first config, while a peer is at its bound: %v", err)
	}
	if got, _ := n.List(ctx, "tsk_3"); len(got) != 1 {
		t.Errorf("tsk_3 has %d configs, want the operator's only", len(got))
	}

	// tsk_2 ends and its end is delivered: its config no longer counts.
	storeAndReport(t, db, n, "tsk_2", a2a.TaskStateCompleted, 9)
	waitUntil(t, "tsk_2's end delivered", func() bool {
		var q string
		db.QueryRow(`SELECT coalesce(queued, '') FROM push_configs WHERE task_id = 'tsk_2'`).Scan(&q)
		return strings.HasPrefix(q, string(a2a.TaskStateCompleted)) && waiting(t, db) == 0
	})
	if err := n.CheckRoom(ctx, "peer"); err != nil {
		t.Errorf("after one of its tasks ended and was delivered, the peer: %v", err)
	}
	if err := create("peer", "tsk_3", "b"); err != nil {
		t.Errorf("a config in the room an ended task left: %v", err)
	}
}

// TestCallerOfConfigsOfBeforeFairDelivery: a push_configs of before the column caller gets it from the
// task store's tasks.caller, so a peer's config made then takes the peer's slots and counts toward its
// bound.
func TestCallerOfConfigsOfBeforeFairDelivery(t *testing.T) {
	path, db := taskDB(t)
	if _, err := db.Exec(`ALTER TABLE tasks ADD COLUMN caller TEXT NOT NULL DEFAULT ''`); err != nil {
		t.Fatal(err)
	}
	storeTask(t, db, "tsk_peer", a2a.TaskStateWorking)
	storeTask(t, db, "tsk_op", a2a.TaskStateWorking)
	db.Exec(`UPDATE tasks SET caller = 'peer' WHERE id = 'tsk_peer'`)
	if _, err := db.Exec(`CREATE TABLE push_configs (task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, id TEXT NOT NULL,
		config TEXT NOT NULL, created INTEGER NOT NULL, queued TEXT, PRIMARY KEY (task_id, id))`); err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"tsk_peer", "tsk_op"} {
		if _, err := db.Exec(`INSERT INTO push_configs VALUES (?, 'c', '{"url":"http://127.0.0.1:9/x"}', 1, NULL)`, task); err != nil {
			t.Fatal(err)
		}
	}
	n := open(t, path, Config{ConfigsPerCaller: 1, Backoff: time.Hour})
	defer n.Close()
	got := map[string]string{}
	rows, err := db.Query(`SELECT task_id, caller FROM push_configs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var task, caller string
		rows.Scan(&task, &caller)
		got[task] = caller
	}
	rows.Close()
	if got["tsk_peer"] != "peer" || got["tsk_op"] != "" {
		t.Errorf("callers after the upgrade: %v, want tsk_peer's peer and tsk_op's the operator", got)
	}
	if err := n.CheckRoom(context.Background(), "peer"); !errors.Is(err, ErrTooManyOfCaller) {
		t.Errorf("the peer's config of before the upgrade does not count: %v", err)
	}
}
