package pgpush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member/push"
	"github.com/murmur-run/murmur/member/store/postgres"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// openStore opens a store on dsn as replica (or a member of one process, "") and closes it when t ends.
func openStore(t *testing.T, dsn, replica string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, postgres.Config{Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openNotifier opens a Notifier on s that may post to loopback, closed when t ends.
func openNotifier(t *testing.T, s *postgres.Store, cfg Config) *Notifier {
	t.Helper()
	allow, err := push.NewAllowlist([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Push.Allow = allow
	if cfg.Push.Backoff == 0 {
		cfg.Push.Backoff = 10 * time.Millisecond
	}
	n, err := Open(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// receiver is a webhook on loopback that answers its first fail posts 503 and records the rest: the
// status of each task posted, in order, and the token it came with.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	fail   int
	hits   int
	states map[a2a.TaskID][]string // the status texts posted, per task
	tokens []string
	ch     chan struct{}
}

func newReceiver(t *testing.T, fail int) *receiver {
	r := &receiver{fail: fail, states: map[a2a.TaskID][]string{}, ch: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.hits++
		if r.hits <= r.fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var sr a2a.StreamResponse
		if err := json.Unmarshal(b, &sr); err != nil || sr.Task == nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(sr.Task.History) != 0 {
			w.WriteHeader(http.StatusBadRequest) // the body is the task without its history
			return
		}
		r.states[sr.Task.ID] = append(r.states[sr.Task.ID], statusOf(sr.Task))
		r.tokens = append(r.tokens, req.Header.Get("A2A-Notification-Token"))
		r.ch <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// statusOf is a task's state, and the text of its status message when it has one.
func statusOf(t *a2a.Task) string {
	s := string(t.Status.State)
	if m := t.Status.Message; m != nil && len(m.Parts) > 0 && m.Parts[0].Text != nil {
		s += " " + *m.Parts[0].Text
	}
	return s
}

// await waits until the receiver has recorded want posts of task.
func (r *receiver) await(t *testing.T, task a2a.TaskID, want int) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		got := append([]string(nil), r.states[task]...)
		r.mu.Unlock()
		if len(got) >= want {
			return got
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("%d posts of task %s within 30s, want %d: %v", len(got), task, want, got)
		}
	}
}

func task(id string, state a2a.TaskState, text string) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx_1", Status: a2a.TaskStatus{State: state},
		History: []a2a.Message{{MessageID: a2a.MessageID("m_" + id), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("question")}}}}
	if text != "" {
		t.Status.Message = &a2a.Message{MessageID: a2a.MessageID("s_" + text), Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(text)}}
	}
	return t
}

func config(taskID, id, url string) a2a.TaskPushNotificationConfig {
	return a2a.TaskPushNotificationConfig{TaskID: a2a.TaskID(taskID), ID: id, URL: url, Token: "tok-" + id}
}

// A config gets its task's status as it stands, then each change, in order, with its token; the task's
// end is the last, and a status written after it is not queued.
func TestDeliveryInOrder(t *testing.T) {
	s := openStore(t, pgtest.Start(t).NewDatabase(t), "")
	n := openNotifier(t, s, Config{})
	r := newReceiver(t, 0)
	ctx := t.Context()
	if err := s.Create(ctx, task("t1", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(ctx, "", config("t1", "c1", r.srv.URL)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Update(ctx, task("t1", a2a.TaskStateWorking, fmt.Sprint("step ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, task("t1", a2a.TaskStateCompleted, "done")); err != nil {
		t.Fatal(err)
	}
	got := r.await(t, "t1", 7)
	want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING step 0", "TASK_STATE_WORKING step 1", "TASK_STATE_WORKING step 2",
		"TASK_STATE_WORKING step 3", "TASK_STATE_WORKING step 4", "TASK_STATE_COMPLETED done"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("posted %q, want %q", got, want)
	}
	if err := s.Update(ctx, task("t1", a2a.TaskStateCompleted, "again")); err != nil {
		t.Fatal(err)
	}
	var waiting int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM push_outbox`).Scan(&waiting); err != nil || waiting == 0 {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // a post of "again" would have time to arrive
	r.mu.Lock()
	defer r.mu.Unlock()
	if waiting != 0 || len(r.states["t1"]) != 7 {
		t.Errorf("%d changes waiting, %d posted, after a status written past the task's end: want none queued after it", waiting, len(r.states["t1"]))
	}
	for _, tok := range r.tokens {
		if tok != "tok-c1" {
			t.Errorf("a post came with token %q, want tok-c1", tok)
		}
	}
}

// Two replicas deliver one task's changes: each change is posted once, in order, whichever replica
// made the change or made the config, and the notifiers of both claim changes.
func TestTwoReplicasDeliverEachChangeOnce(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	s1, s2 := openStore(t, dsn, "r1"), openStore(t, dsn, "r2")
	claims := map[string]int{}
	var mu sync.Mutex
	counted := func(s *postgres.Store) Config {
		return Config{Push: push.Config{Delivered: func(string) {
			mu.Lock()
			claims[s.Replica()]++
			mu.Unlock()
		}}}
	}
	openNotifier(t, s1, counted(s1))
	n2 := openNotifier(t, s2, counted(s2))
	r := newReceiver(t, 0)
	ctx := t.Context()
	const tasks, steps = 8, 10
	for i := range tasks {
		id := fmt.Sprint("t", i)
		if err := s1.Create(ctx, task(id, a2a.TaskStateSubmitted, "")); err != nil {
			t.Fatal(err)
		}
		if _, err := n2.Create(ctx, "", config(id, "c", r.srv.URL)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Go(func() {
			id := fmt.Sprint("t", i)
			for j := range steps {
				if err := s1.Update(ctx, task(id, a2a.TaskStateWorking, fmt.Sprint(j))); err != nil {
					t.Error(err)
				}
			}
			if err := s1.Update(ctx, task(id, a2a.TaskStateCompleted, "done")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range tasks {
		id := a2a.TaskID(fmt.Sprint("t", i))
		got := r.await(t, id, steps+2)
		want := []string{"TASK_STATE_SUBMITTED"}
		for j := range steps {
			want = append(want, fmt.Sprint("TASK_STATE_WORKING ", j))
		}
		want = append(want, "TASK_STATE_COMPLETED done")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("task %s: posted %q, want %q", id, got, want)
		}
	}
	time.Sleep(100 * time.Millisecond) // a duplicate would have time to arrive
	r.mu.Lock()
	if r.hits != tasks*(steps+2) {
		t.Errorf("%d posts, want %d: each change once", r.hits, tasks*(steps+2))
	}
	r.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("deliveries by replica: %v", claims)
}

// A post that fails is tried again after the backoff, the config's later changes waiting behind it; one
// that fails MaxAttempts times is given up and the next change posted.
func TestRetryThenGiveUp(t *testing.T) {
	s := openStore(t, pgtest.Start(t).NewDatabase(t), "")
	var mu sync.Mutex
	var outcomes []string
	n := openNotifier(t, s, Config{Push: push.Config{MaxAttempts: 3, Delivered: func(o string) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}}})
	r := newReceiver(t, 4) // the submitted status fails 3 times (given up), working's first post fails once
	ctx := t.Context()
	if err := s.Create(ctx, task("t1", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(ctx, "", config("t1", "c1", r.srv.URL)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, task("t1", a2a.TaskStateWorking, "on it")); err != nil {
		t.Fatal(err)
	}
	if got := r.await(t, "t1", 1); got[0] != "TASK_STATE_WORKING on it" {
		t.Errorf("posted %q, want the working status after the submitted one was given up", got)
	}
	want := "[retry retry gave_up retry ok]"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got := fmt.Sprint(outcomes)
		mu.Unlock()
		if got == want {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(outcomes) != want {
		t.Errorf("outcomes %v, want %s", outcomes, want)
	}
}

// A change claimed by a replica that died is posted by another once the claim lapses.
func TestLapsedClaimIsPostedAgain(t *testing.T) {
	s := openStore(t, pgtest.Start(t).NewDatabase(t), "r1")
	ctx := t.Context()
	if err := s.Create(ctx, task("t1", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, 0)
	// The config and its first change, claimed by a replica that is gone, for 300 ms more.
	n := openNotifier(t, s, Config{Poll: 50 * time.Millisecond})
	n.Close()
	if _, err := n.Create(ctx, "", config("t1", "c1", r.srv.URL)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE push_outbox SET claimed_by = 'gone', claimed_until = $1`,
		time.Now().Add(300*time.Millisecond).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	openNotifier(t, s, Config{Poll: 50 * time.Millisecond})
	r.await(t, "t1", 1)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("posted after %v, while another replica's claim held it", d)
	}
}

// A new config and a change committed at the same moment: the config has the task's last status, as
// the last it is posted, whichever came first.
func TestConfigRacingAChange(t *testing.T) {
	s := openStore(t, pgtest.Start(t).NewDatabase(t), "")
	n := openNotifier(t, s, Config{})
	r := newReceiver(t, 0)
	ctx := t.Context()
	for i := range 20 {
		id := fmt.Sprint("t", i)
		if err := s.Create(ctx, task(id, a2a.TaskStateSubmitted, "")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Update(ctx, task(id, a2a.TaskStateCompleted, "done")) }()
		if _, err := n.Create(ctx, "", config(id, "c", r.srv.URL)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := r.await(t, a2a.TaskID(id), 1)
		deadline := time.Now().Add(2 * time.Second)
		for got[len(got)-1] != "TASK_STATE_COMPLETED done" && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			r.mu.Lock()
			got = append([]string(nil), r.states[a2a.TaskID(id)]...)
			r.mu.Unlock()
		}
		if got[len(got)-1] != "TASK_STATE_COMPLETED done" {
			t.Errorf("task %s: posted %q, want the end last", id, got)
		}
	}
}

// The configs themselves: stored, read, listed and deleted at any replica; the bounds per task and per
// caller; a deleted config's waiting changes go with it.
func TestConfigs(t *testing.T) {
	// A webhook that never answers keeps its changes waiting; it closes after the notifiers, whose Close
	// ends the posts it holds.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client going away
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	dsn := pgtest.Start(t).NewDatabase(t)
	s1, s2 := openStore(t, dsn, "r1"), openStore(t, dsn, "r2")
	n1 := openNotifier(t, s1, Config{Push: push.Config{ConfigsPerTask: 2, ConfigsPerCaller: 3}})
	n2 := openNotifier(t, s2, Config{Push: push.Config{ConfigsPerTask: 2, ConfigsPerCaller: 3}})
	ctx := t.Context()
	for _, id := range []string{"t1", "t2", "t3"} {
		if err := s1.Create(ctx, task(id, a2a.TaskStateWorking, "")); err != nil {
			t.Fatal(err)
		}
	}
	made, err := n1.Create(ctx, "ops", a2a.TaskPushNotificationConfig{TaskID: "t1", URL: hang.URL})
	if err != nil || made.ID == "" {
		t.Fatalf("Create without an id: %+v, %v; want an id chosen", made, err)
	}
	if _, err := n2.Create(ctx, "ops", config("t1", "c2", hang.URL)); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.Create(ctx, "ops", config("t1", "c3", hang.URL)); !errors.Is(err, push.ErrTooMany) {
		t.Errorf("a third config of t1: %v, want ErrTooMany", err)
	}
	if _, err := n2.Create(ctx, "ops", config("t1", "c2", hang.URL+"/again")); err != nil {
		t.Errorf("replacing c2: %v, want it taken (not one more)", err)
	}
	if _, err := n1.Create(ctx, "ops", config("t2", "c1", hang.URL)); err != nil {
		t.Fatal(err)
	}
	if err := n2.CheckRoom(ctx, "ops"); !errors.Is(err, push.ErrTooManyOfCaller) {
		t.Errorf("CheckRoom for a caller with 3 configs: %v, want ErrTooManyOfCaller", err)
	}
	if err := n2.CheckRoom(ctx, "peer"); err != nil {
		t.Errorf("CheckRoom for another caller: %v", err)
	}
	got, err := n2.Get(ctx, "t1", "c2")
	if err != nil || got.URL != hang.URL+"/again" || got.Token != "tok-c2" {
		t.Errorf("Get at the other replica: %+v, %v", got, err)
	}
	if _, err := n2.Get(ctx, "t1", "nope"); !errors.Is(err, push.ErrNotFound) {
		t.Errorf("Get of a config that is not there: %v, want ErrNotFound", err)
	}
	list, err := n1.List(ctx, "t1")
	if err != nil || len(list) != 2 || list[0].ID != made.ID || list[1].ID != "c2" {
		t.Errorf("List: %+v, %v; want the two configs, oldest first", list, err)
	}
	if err := n1.Delete(ctx, "t1", "c2"); err != nil {
		t.Fatal(err)
	}
	if err := n1.Delete(ctx, "t1", "c2"); err != nil {
		t.Errorf("deleting it again: %v, want no error", err)
	}
	var waiting int
	if err := s1.Pool().QueryRow(ctx, `SELECT count(*) FROM push_outbox WHERE config_id = 'c2'`).Scan(&waiting); err != nil || waiting != 0 {
		t.Errorf("%d changes of the deleted config waiting (%v), want none", waiting, err)
	}
	if err := n2.CheckRoom(ctx, "ops"); err != nil {
		t.Errorf("CheckRoom after a delete: %v, want room", err)
	}
	var exists bool
	if err := s1.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_configs WHERE task_id = 't1' AND id = 'c2')`).Scan(&exists); err != nil || exists {
		t.Errorf("the deleted config is still stored (%v)", err)
	}
}

// A config of a task the store does not have is refused as a task not found.
func TestConfigOfNoTask(t *testing.T) {
	s := openStore(t, pgtest.Start(t).NewDatabase(t), "")
	n := openNotifier(t, s, Config{})
	_, err := n.Create(t.Context(), "", config("ghost", "c1", "http://127.0.0.1:9/"))
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Create for a missing task: %v, want ErrTaskNotFound", err)
	}
	var rows int
	s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM push_configs`).Scan(&rows)
	if rows != 0 {
		t.Errorf("%d configs stored", rows)
	}
}

// A config's outbox holds Config.Push.Outbox changes: while its webhook holds the first post, a change
// finding the outbox full takes the place of the newest one waiting, so the oldest waiting and the
// latest are delivered. A notifier not given the bound keeps push.DefaultOutbox with each config.
func TestOutboxBound(t *testing.T) {
	db := pgtest.Start(t)
	s := openStore(t, db.NewDatabase(t), "")
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var sr a2a.StreamResponse
		if err := json.NewDecoder(req.Body).Decode(&sr); err != nil || sr.Task == nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		once.Do(func() {
			close(held)
			<-release
		})
		mu.Lock()
		got = append(got, statusOf(sr.Task))
		mu.Unlock()
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	n := openNotifier(t, s, Config{Push: push.Config{Outbox: 3}})
	ctx := t.Context()
	if err := s.Create(ctx, task("t1", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Create(ctx, "", config("t1", "c1", srv.URL)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the first change was not posted within 30s")
	}
	for _, state := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateCompleted} {
		if err := s.Update(ctx, task("t1", state, "")); err != nil {
			t.Fatal(err)
		}
	}
	var waiting int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM push_outbox`).Scan(&waiting); err != nil || waiting != 3 {
		t.Errorf("%d changes waiting (%v), want the bound 3", waiting, err)
	}
	close(release)
	want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		posted := append([]string(nil), got...)
		mu.Unlock()
		if len(posted) >= len(want) {
			if fmt.Sprint(posted) != fmt.Sprint(want) {
				t.Errorf("the webhook got %q, want %q", posted, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook got %q within 30s, want %q", posted, want)
		}
		time.Sleep(10 * time.Millisecond)
	}

	other := openStore(t, db.NewDatabase(t), "")
	if err := other.Create(ctx, task("t2", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := openNotifier(t, other, Config{}).Create(ctx, "", config("t2", "c2", srv.URL)); err != nil {
		t.Fatal(err)
	}
	var bound int
	if err := other.Pool().QueryRow(ctx, `SELECT outbox FROM push_configs WHERE task_id = 't2'`).Scan(&bound); err != nil || bound != push.DefaultOutbox {
		t.Errorf("a config stored by a notifier without the setting has the bound %d (%v), want push.DefaultOutbox %d", bound, err, push.DefaultOutbox)
	}
}
