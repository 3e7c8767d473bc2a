package server

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	a2aclient "github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/postgres"
	"github.com/murmur-run/murmur/roster"
)

// replicaSet is one member run as three replicas, each its own formation (a process of its own in
// production: mur member), on one PostgreSQL database.
type replicaSet struct {
	t       *testing.T
	dsn     string
	capsule string // the capsule directory: "go" in it lets the gated tasks finish
	fs      []*Formation
	clients []*a2aclient.Client
}

func startReplicas(t *testing.T, n int, lease time.Duration) *replicaSet {
	t.Helper()
	return startReplicaFiles(t, n, lease, map[string]string{"murmur.yaml": gatedScript})
}

// startReplicaFiles is startReplicas of the capsule files makes (capsule-relative paths to contents).
func startReplicaFiles(t *testing.T, n int, lease time.Duration, files map[string]string) *replicaSet {
	t.Helper()
	return startReplicaRoster(t, n, lease, files, "")
}

// startReplicaRoster is startReplicaFiles with more members in the roster (YAML list entries, not
// started), such as a peer whose credential a test presents.
func startReplicaRoster(t *testing.T, n int, lease time.Duration, files map[string]string, more string) *replicaSet {
	t.Helper()
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	rs := &replicaSet{t: t, dsn: dsn, capsule: filepath.Join(root, "solo")}
	for name, body := range files {
		path := filepath.Join(rs.capsule, name)
		if strings.HasPrefix(name, ".murmur/") { // the project's artifact store is beside roster.yaml
			path = filepath.Join(root, name)
		}
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(body), 0o755)
	}
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: reps\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n    replicas: 3\n    store: "+pgURL(t, dsn)+"\n"+more), 0o644)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		f, err := StartFormation(FormationConfig{Roster: r, Only: []string{"solo"}, DataDir: filepath.Join(root, "data"),
			RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken},
			Version: "test", Replica: "r" + string(rune('1'+i)), Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		rs.fs = append(rs.fs, f)
		rs.clients = append(rs.clients, (&fixture{t: t, url: f.Members[0].URL}).client(testOperatorToken))
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
		for _, f := range rs.fs {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := f.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			cancel()
		}
	})
	return rs
}

// owners reads which replica owns each task, behind the member's back.
func (rs *replicaSet) owners() map[a2ago.TaskID]string {
	rs.t.Helper()
	conn, err := pgx.Connect(context.Background(), rs.dsn)
	if err != nil {
		rs.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT id, owner FROM tasks`)
	if err != nil {
		rs.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{ id, owner string }, error) {
		var v struct{ id, owner string }
		return v, r.Scan(&v.id, &v.owner)
	})
	if err != nil {
		rs.t.Fatal(err)
	}
	m := map[a2ago.TaskID]string{}
	for _, v := range out {
		m[a2ago.TaskID(v.id)] = v.owner
	}
	return m
}

// waitState polls task id through client c until it is in state want.
func waitState(t *testing.T, c *a2aclient.Client, id a2ago.TaskID, want a2ago.TaskState) *a2ago.Task {
	t.Helper()
	var last *a2ago.Task
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: id})
		if err == nil && got.Status.State == want {
			return got
		}
		last = got
	}
	t.Fatalf("task %s never reached %s: last %+v", id, want, last)
	return nil
}

// Three replicas of one member behind their own doors: a task the first replica is too busy for runs on
// another, a member is busy only when all three are, any replica answers GetTask and CancelTask for a
// task another runs, and a blocking SendMessage on one replica returns the answer of a task another ran.
func TestReplicasShareOneMember(t *testing.T) {
	rs := startReplicas(t, 3, 2*time.Second)
	ctx := context.Background()
	var sent []*a2ago.Task
	for i := range 3 {
		task := sendTask(t, rs.clients[0], "task "+string(rune('a'+i)), true)
		if task.Status.State != a2ago.TaskStateSubmitted && task.Status.State != a2ago.TaskStateWorking {
			t.Fatalf("task %d at the first replica: %s %s; want it taken (the member has three replicas)", i, task.Status.State, statusText(task))
		}
		sent = append(sent, task)
	}
	for _, task := range sent {
		waitState(t, rs.clients[2], task.ID, a2ago.TaskStateWorking) // read at another replica than the one sent to
	}
	owners := rs.owners()
	var who []string
	for _, task := range sent {
		who = append(who, owners[task.ID])
	}
	slices.Sort(who)
	if !slices.Equal(who, []string{"r1", "r2", "r3"}) {
		t.Fatalf("the three tasks run on %v; want one on each replica", who)
	}
	busy := sendTask(t, rs.clients[1], "one too many", true)
	if busy.Status.State != a2ago.TaskStateRejected || statusText(busy) != member.BusyMessage {
		t.Errorf("a fourth task while all three replicas run one: %s %q; want rejected with SPEC's busy text", busy.Status.State, statusText(busy))
	}

	// CancelTask at a replica that does not run the task reaches the one that does.
	var victim *a2ago.Task
	for _, task := range sent {
		if owners[task.ID] == "r2" {
			victim = task
		}
	}
	canceled, err := rs.clients[2].CancelTask(ctx, &a2ago.CancelTaskRequest{ID: victim.ID})
	if err != nil || canceled.Status.State != a2ago.TaskStateCanceled {
		t.Fatalf("CancelTask at r3 of r2's task: %v %+v", err, canceled)
	}
	waitState(t, rs.clients[1], victim.ID, a2ago.TaskStateCanceled)

	// r2 has a place again: a task sent to r1, busy, is claimed by r2.
	next := sendTask(t, rs.clients[0], "after the cancel", true)
	waitState(t, rs.clients[0], next.ID, a2ago.TaskStateWorking)
	if o := rs.owners()[next.ID]; o != "r2" {
		t.Errorf("a task offered while only r2 had a place runs on %q", o)
	}

	// A blocking SendMessage answered with a task another replica ran: finish everything, then send
	// one more to r1 while it is free, and read the others' ends from r3.
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	for _, task := range append(sent, next) {
		if task.ID == victim.ID {
			continue
		}
		got := waitState(t, rs.clients[2], task.ID, a2ago.TaskStateCompleted)
		if got.Artifacts == nil && statusText(got) == "" {
			t.Errorf("task %s completed without an answer", task.ID)
		}
	}
}

// A replica that stops renewing its lease is dead to the others: once its lease lapses, one of them ends
// its running task failed with the restart message, and its queued task is claimed and run by another.
func TestReplicaWhoseLeaseLapses(t *testing.T) {
	rs := startReplicas(t, 2, time.Second)
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	ghost, err := postgres.Open(context.Background(), rs.dsn, postgres.Config{Replica: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	running := &a2a.Task{ID: "tsk_ghostrunning", ContextID: "ctx_g1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []a2a.Message{{MessageID: "msg_g1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("was running")}}}}
	queued := &a2a.Task{ID: "tsk_ghostqueued", ContextID: "ctx_g2", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History: []a2a.Message{{MessageID: "msg_g2", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("was queued")}}}}
	for _, tk := range []*a2a.Task{running, queued} {
		if err := ghost.Create(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ghost.Renew(context.Background(), 300*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	ghost.Close() // it renews no more, as a process that died
	got := waitState(t, rs.clients[0], a2ago.TaskID(running.ID), a2ago.TaskStateFailed)
	if statusText(got) != store.RestartMessage {
		t.Errorf("the dead replica's running task ended %q; want the restart message", statusText(got))
	}
	done := waitState(t, rs.clients[1], a2ago.TaskID(queued.ID), a2ago.TaskStateCompleted)
	if o := rs.owners()[done.ID]; o != "r1" && o != "r2" {
		t.Errorf("the dead replica's queued task ran on %q; want a live replica", o)
	}
}

// A replica runs a queued task only while it still owns it when the task's turn comes. A replica whose
// lease lapsed under load may be reaped while a task it holds waits in its queue; another replica then
// claims and runs it. The one that lost the claim must let it go unrun, or the task runs twice
// (TestReplicaChaos's "ran 2 times"). Here r1 runs the first task, the second is offered (stored
// unclaimed) and the third, with no room left anywhere, waits in r1's queue, owned by r1; it passes to
// another replica behind r1's back: r1 lets it go, then claims and runs the second.
func TestReplicaRunsOnlyWhatItStillOwns(t *testing.T) {
	const capsule = `name: solo
script:
  command: [sh, -c, 'read -r line; echo "$line" >> "$MUR_CAPSULE_DIR/runs.log"; while [ ! -e "$MUR_CAPSULE_DIR/go" ]; do sleep 0.01; done; echo "done: $line"']
task_acceptance: queue
queue_size: 1
`
	rs := startReplicaFiles(t, 1, time.Minute, map[string]string{"murmur.yaml": capsule})
	first := sendTask(t, rs.clients[0], "first", true)
	waitState(t, rs.clients[0], first.ID, a2ago.TaskStateWorking)
	second := sendTask(t, rs.clients[0], "second", true)
	third := sendTask(t, rs.clients[0], "third", true)
	if o := rs.owners(); o[second.ID] != "" || o[third.ID] != "r1" {
		t.Fatalf("the second task is owned by %q and the third by %q; want none (offered) and r1 (queued there)", o[second.ID], o[third.ID])
	}
	conn, err := pgx.Connect(context.Background(), rs.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE tasks SET owner = 'r2', version = version + 1 WHERE id = $1`, string(third.ID)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	waitState(t, rs.clients[0], second.ID, a2ago.TaskStateCompleted)
	runs, _ := os.ReadFile(filepath.Join(rs.capsule, "runs.log"))
	if got := strings.Fields(string(runs)); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("r1 ran %q; want first and second only: the third was another replica's when its turn came", got)
	}
	if got := waitState(t, rs.clients[0], third.ID, a2ago.TaskStateSubmitted); rs.owners()[got.ID] != "r2" {
		t.Errorf("the third task is owned by %q; want r2, which claimed it", rs.owners()[got.ID])
	}
}
