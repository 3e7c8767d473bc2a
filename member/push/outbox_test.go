package push

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
)

// waiting counts the changes in the outbox.
func waiting(t testing.TB, db *sql.DB) int {
	t.Helper()
	k, err := countWaiting(db)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func countWaiting(db *sql.DB) (k int, err error) {
	err = db.QueryRow(`SELECT count(*) FROM push_outbox`).Scan(&k)
	return k, err
}

// waitUntil polls cond (a real SQLite file or a receiver) for up to 30 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
	}
}

// storeAndReport stores the task in state (its status at second sec, with a message of that id) as the task
// store would, and reports it to n (when not nil) as the hub would: with the task.
func storeAndReport(t testing.TB, db *sql.DB, n *Notifier, id string, state a2a.TaskState, sec int) {
	t.Helper()
	if err := storeChange(db, n, id, state, sec); err != nil {
		t.Fatal(err)
	}
}

func storeChange(db *sql.DB, n *Notifier, id string, state a2a.TaskState, sec int) error {
	task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx_1", Status: a2a.TaskStatus{State: state,
		Timestamp: a2a.NewTimestamp(time.Unix(int64(1e9+sec), 0)),
		Message:   &a2a.Message{MessageID: a2a.MessageID(fmt.Sprint("msg_", sec)), Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(string(state))}}}}
	body, _ := json.Marshal(task)
	if _, err := db.Exec(`INSERT INTO tasks (id, task) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET task = excluded.task`, id, string(body)); err != nil {
		return err
	}
	if n != nil {
		n.Changed(events.Change{TaskID: task.ID, State: state, Task: task})
	}
	return nil
}

func (r *receiver) states(t *testing.T, k int) []a2a.TaskState {
	t.Helper()
	var got []a2a.TaskState
	for range k {
		got = append(got, r.next(t))
	}
	return got
}

// TestEachChangeDelivered: while the webhook holds its first delivery, the task works and completes; the
// webhook then gets each change, in order, each with the task as it stood at that change.
func TestEachChangeDelivered(t *testing.T) {
	path, db := taskDB(t)
	hold := make(chan struct{})
	r := newHeldReceiver(t, 0, hold)
	n := open(t, path, Config{})
	defer n.Close()
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateSubmitted, 1)
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: r.srv.URL}); err != nil {
		t.Fatal(err)
	}
	<-r.held // SUBMITTED is being delivered
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateWorking, 2)
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateCompleted, 3)
	waitUntil(t, "both changes in the outbox", func() bool { return waiting(t, db) == 3 })
	close(hold)
	got := r.states(t, 3)
	if fmt.Sprint(got) != fmt.Sprint([]a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}) {
		t.Errorf("the webhook got %v, want SUBMITTED, WORKING, COMPLETED", got)
	}
	r.mu.Lock()
	if m := r.body[1].Task.Status.Message; m == nil || m.MessageID != "msg_2" {
		t.Errorf("the WORKING delivery carries status %+v, want the task as it stood at that change", r.body[1].Task.Status)
	}
	r.mu.Unlock()
	waitUntil(t, "the outbox emptied", func() bool { return waiting(t, db) == 0 })
	n.Close()
}

// TestOutboxBound: a config's outbox holds Outbox changes; past it the newest waiting change gives way,
// so the first and the latest are delivered and every drop is counted.
func TestOutboxBound(t *testing.T) {
	path, db := taskDB(t)
	hold := make(chan struct{})
	r := newHeldReceiver(t, 0, hold)
	var dropped atomic.Int64
	n := open(t, path, Config{Outbox: 3, Dropped: func() { dropped.Add(1) }})
	defer n.Close()
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateSubmitted, 1)
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: r.srv.URL}); err != nil {
		t.Fatal(err)
	}
	<-r.held
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateWorking, 2)
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateInputRequired, 3)
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateWorking, 4)
	storeAndReport(t, db, n, "tsk_1", a2a.TaskStateCompleted, 5)
	waitUntil(t, "every change written", func() bool {
		var q sql.NullString
		db.QueryRow(`SELECT queued FROM push_configs`).Scan(&q)
		return strings.HasPrefix(q.String, string(a2a.TaskStateCompleted))
	})
	if k := waiting(t, db); k != 3 {
		t.Errorf("%d changes waiting, want the bound 3", k)
	}
	close(hold)
	got := r.states(t, 3)
	if fmt.Sprint(got) != fmt.Sprint([]a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}) {
		t.Errorf("the webhook got %v, want SUBMITTED, WORKING, COMPLETED", got)
	}
	if d := dropped.Load(); d != 2 {
		t.Errorf("%d changes reported dropped, want 2", d)
	}
}

// childEnv names the task store file a child process (TestDeliveredAfterKill) works on.
const childEnv = "MUR_PUSH_TEST_CHILD"

// child is the member TestDeliveredAfterKill kills: it makes a config for a task whose webhook is down,
// stores the task's changes, says "ready" once they are in the outbox, and waits to be killed.
func child() int {
	path, hook := os.Getenv(childEnv), os.Getenv(childEnv+"_HOOK")
	allow, _ := NewAllowlist([]string{"127.0.0.1"})
	n, err := Open(Config{Path: path, Allow: allow, Backoff: time.Hour})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if _, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: "tsk_1", URL: hook}); err != nil {
		fmt.Println(err)
		return 1
	}
	for _, err := range []error{storeChange(db, n, "tsk_1", a2a.TaskStateWorking, 2), storeChange(db, n, "tsk_1", a2a.TaskStateCompleted, 3)} {
		if err != nil {
			fmt.Println(err)
			return 1
		}
	}
	// The task's end is queued: WORKING may have been merged into it when the notifier fell behind (a
	// loaded machine), so what is waiting is the end and what came before it, 2 or 3 changes.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ended int
		err := db.QueryRow(`SELECT count(*) FROM push_outbox WHERE status LIKE '%COMPLETED%'`).Scan(&ended)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		if ended > 0 {
			break
		}
		if time.Now().After(deadline) {
			k, _ := countWaiting(db)
			fmt.Printf("the task's end was not queued within 60s (%d changes waiting)\n", k)
			return 1
		}
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Println("ready")
	select {}
}

// TestDeliveredAfterKill: a member process is killed (SIGKILL) after its task's changes were stored and
// before its webhook took them; the member started again on the same file delivers each, in order.
func TestDeliveredAfterKill(t *testing.T) {
	path, db := taskDB(t)
	storeAndReport(t, db, nil, "tsk_1", a2a.TaskStateSubmitted, 1)
	down := newReceiver(t, 1<<30)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path, childEnv+"_HOOK="+down.srv.URL+"/hook")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q", line)
	}
	waitUntil(t, "the child's first delivery failed", func() bool { down.mu.Lock(); defer down.mu.Unlock(); return down.hits > 0 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	k := waiting(t, db)
	if k != 2 && k != 3 {
		t.Fatalf("%d changes waiting after the kill, want SUBMITTED, WORKING (unless merged) and COMPLETED", k)
	}
	up := newReceiver(t, 0)
	if _, err := db.Exec(`UPDATE push_configs SET config = json_set(config, '$.url', ?)`, up.srv.URL+"/hook"); err != nil {
		t.Fatal(err) // the same webhook, back up (a new port on loopback)
	}
	n := open(t, path, Config{})
	defer n.Close()
	got := up.states(t, k)
	want := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted}
	if k == 2 {
		want = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateCompleted}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the restart the webhook got %v, want %v", got, want)
	}
	waitUntil(t, "the outbox emptied", func() bool { return waiting(t, db) == 0 })
	n.Close()
}

// TestConfigsOfBeforeTheOutbox: a push_configs table of before the outbox (a column delivered) gets its
// column queued; a config that had delivered its task's status gets nothing again, one that had not gets
// the task's status.
func TestConfigsOfBeforeTheOutbox(t *testing.T) {
	path, db := taskDB(t)
	storeTask(t, db, "tsk_done", a2a.TaskStateCompleted)
	storeTask(t, db, "tsk_behind", a2a.TaskStateCompleted)
	r := newReceiver(t, 0)
	if _, err := db.Exec(`CREATE TABLE push_configs (task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, id TEXT NOT NULL,
		config TEXT NOT NULL, created INTEGER NOT NULL, delivered TEXT, PRIMARY KEY (task_id, id))`); err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"tsk_done", "tsk_behind"} {
		cfg, _ := json.Marshal(a2a.TaskPushNotificationConfig{ID: "c", TaskID: a2a.TaskID(task), URL: r.srv.URL})
		if _, err := db.Exec(`INSERT INTO push_configs VALUES (?, 'c', ?, 1, CASE WHEN ? = 'tsk_done' THEN (SELECT json_extract(task, '$.status') FROM tasks WHERE id = ?) END)`,
			task, string(cfg), task, task); err != nil {
			t.Fatal(err)
		}
	}
	n := open(t, path, Config{})
	defer n.Close()
	if s := r.next(t); s != a2a.TaskStateCompleted {
		t.Fatalf("got %s", s)
	}
	waitUntil(t, "the outbox emptied", func() bool { return waiting(t, db) == 0 })
	n.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.body) != 1 || r.body[0].Task.ID != "tsk_behind" {
		t.Errorf("after the upgrade the webhooks got %d deliveries, want tsk_behind's status only", len(r.body))
	}
}
