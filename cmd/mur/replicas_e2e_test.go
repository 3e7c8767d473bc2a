package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/internal/pgtest"
)

// The replicated member of the end-to-end tests: each run appends its message to runs.log in its
// replica's workdir, then answers after a short wait ("slow ..." waits long enough to be canceled).
const lbCapsule = `name: solo
script:
  command: [sh, -c, 'read -r line; echo "$line" >> runs.log; case "$line" in slow*) sleep 30 ;; *) sleep 0.3 ;; esac; echo "did: $line"']
task_acceptance: queue
queue_size: 4
`

// haproxyBin is where Debian's haproxy package puts the load balancer.
const haproxyBin = "/usr/sbin/haproxy"

// lbReplica is one `mur member --replica` process of an end-to-end test.
type lbReplica struct {
	name, addr string
	cmd        *exec.Cmd
	stdout     *syncBuffer
	stderr     *syncBuffer
	done       chan struct{} // closed when the process has exited; then err is its exit
	err        error
}

var lbDoorLine = regexp.MustCompile(`(?m)^\s+solo\s+http://\S+/a2a$`)

// startLBReplica runs this test binary as `mur member --replica name --listen addr` of the member solo
// of rosterPath, with env added, and waits for its door. Its output is kept (and its stderr also
// copied to the test's); the process is killed and reaped when the test ends.
func startLBReplica(t *testing.T, rosterPath, dataDir, name, addr string, env ...string) *lbReplica {
	t.Helper()
	r := &lbReplica{name: name, addr: addr, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(os.Args[0], "member", "--roster", rosterPath, "--name", "solo", "--replica", name,
		"--listen", addr, "--data-dir", dataDir, "--log-level", "error")
	r.cmd.Env = append(os.Environ(), "MUR_TEST_AS_MUR=1", "MUR_OPERATOR_TOKEN=op", "MUR_FORMATION_TOKEN=fm",
		"MUR_RECORDS_DIR="+filepath.Join(dataDir, "records"))
	r.cmd.Env = append(r.cmd.Env, env...)
	r.cmd.Stdout = r.stdout
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("replica %s's stderr:\n%s", name, r.stderr.String())
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// The line it prints names the roster's URL for the door (derived from the roster's listen,
		// not from --listen); the door listens at addr.
		if lbDoorLine.MatchString(r.stdout.String()) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("replica %s says its door is open, and nothing listens at --listen %s: %v", name, addr, err)
			}
			c.Close()
			return r
		}
		select {
		case <-r.done:
			t.Fatalf("replica %s exited before opening its door (%v):\n%s", name, r.err, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s did not open its door:\n%s", name, r.stderr.String())
		}
	}
}

// exited waits up to d for the replica's process to exit and returns its exit code, or -1 if it is
// still running.
func (r *lbReplica) exited(d time.Duration) int {
	select {
	case <-r.done:
	case <-time.After(d):
		return -1
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		return -2
	}
	return 0
}

// lbFormation writes a formation of one member, solo (lbCapsule), with replicas: 3 on the PostgreSQL
// database dsn, and returns its roster and data directory.
func lbFormation(t *testing.T, dsn string) (rosterPath, dataDir string) {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(lbCapsule), 0o644)
	rosterPath = filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: lb\nmembers:\n  - name: solo\n    capsule: ./solo\n    replicas: 3\n    store: "+pgtest.URL(t, dsn)+"\n"), 0o644)
	return rosterPath, filepath.Join(root, "data")
}

// lbBearer adds the operator's token to every request; with hosts, it also sends each request to the
// next of them in turn (the balancing in the client, where no load balancer is installed).
type lbBearer struct {
	token string
	hosts []string
	next  *atomic.Uint64
	base  http.RoundTripper
}

func (b lbBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if len(b.hosts) > 0 {
		r.URL.Host = b.hosts[b.next.Add(1)%uint64(len(b.hosts))]
		r.Host = ""
	}
	return b.base.RoundTrip(r)
}

// lbClient is the independent A2A client (a2a-go v2.3.1) of the door at baseURL, sending each request
// to the next of hosts in turn when hosts are given.
func lbClient(t *testing.T, baseURL string, hosts []string) *a2aclient.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: lbBearer{token: "op", hosts: hosts, next: &atomic.Uint64{}, base: tr}}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2ago.AgentInterface{a2ago.NewAgentInterface(baseURL+"/a2a", a2ago.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// startHAProxy runs haproxy in front of the replicas at addrs (mode http, round robin) on a free
// loopback port, and returns its URL. Its timeouts outlast any SSE stream of the test.
func startHAProxy(t *testing.T, front string, addrs []string) string {
	t.Helper()
	var servers strings.Builder
	for i, a := range addrs {
		fmt.Fprintf(&servers, "  server r%d %s\n", i+1, a)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	os.WriteFile(cfg, []byte(`global
  maxconn 512
defaults
  mode http
  timeout connect 5s
  timeout client 5m
  timeout server 5m
  timeout http-keep-alive 5m
frontend door
  bind `+front+`
  default_backend replicas
backend replicas
  balance roundrobin
`+servers.String()), 0o644)
	out := &syncBuffer{}
	cmd := exec.Command(haproxyBin, "-f", cfg, "-db")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", front); err == nil {
			c.Close()
			return "http://" + front
		}
		select {
		case <-done:
			t.Fatalf("haproxy exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s:\n%s", front, out.String())
		}
	}
}

// taskOwners reads which replica owns (ran) each task, behind the member's back.
func taskOwners(t *testing.T, dsn string) map[a2ago.TaskID]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, owner FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[a2ago.TaskID]string{}
	var id, owner string
	if _, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error {
		owners[a2ago.TaskID(id)] = owner
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return owners
}

// lbText is the text of a task's status message or of its artifact name.
func lbText(t *a2ago.Task, artifact string) string {
	var parts []*a2ago.Part
	if artifact == "" {
		if t.Status.Message != nil {
			parts = t.Status.Message.Parts
		}
	} else {
		for _, a := range t.Artifacts {
			if a.Name == artifact {
				parts = a.Parts
			}
		}
	}
	var s []string
	for _, p := range parts {
		s = append(s, p.Text())
	}
	return strings.TrimSpace(strings.Join(s, "\n"))
}

func lbRequest(text string, immediately bool) *a2ago.SendMessageRequest {
	req := &a2ago.SendMessageRequest{Message: a2ago.NewMessage(a2ago.MessageRoleUser, a2ago.NewTextPart(text))}
	req.Message.ID = "msg-lb-" + a2ago.NewMessageID()
	if immediately {
		req.Config = &a2ago.SendMessageConfig{ReturnImmediately: true}
	}
	return req
}

func lbSend(ctx context.Context, c *a2aclient.Client, req *a2ago.SendMessageRequest) (*a2ago.Task, error) {
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	task, ok := res.(*a2ago.Task)
	if !ok {
		return nil, fmt.Errorf("SendMessage answered %T, want a task", res)
	}
	return task, nil
}

// TestThreeReplicasBehindOneURL: three `mur member` replicas of one member on one PostgreSQL database,
// behind haproxy (round robin), driven only through the balancer's URL by a2a-go's client: concurrent
// blocking SendMessages all complete with their answer and run on more than one replica, each once;
// GetTask answers every task whichever replica serves it; a retried SendMessage (same messageId)
// returns the task the first made; CancelTask cancels tasks running on any replica; a stream through
// the balancer follows its task to the end. Without haproxy its subtest is skipped and the client
// balances round robin itself instead.
func TestThreeReplicasBehindOneURL(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	rosterPath, dataDir := lbFormation(t, dsn)
	addrs := freeAddrs(t, 4)
	front, addrs := addrs[3], addrs[:3]
	var replicas []*lbReplica
	for i, a := range addrs {
		replicas = append(replicas, startLBReplica(t, rosterPath, dataDir, fmt.Sprintf("r%d", i+1), a))
	}
	balanced := false
	t.Run("haproxy", func(t *testing.T) {
		if _, err := os.Stat(haproxyBin); err != nil {
			t.Skipf("haproxy is not installed (%s): the client balances round robin instead (Debian: apt-get install haproxy)", haproxyBin)
		}
		balanced = true
		url := startHAProxy(t, front, addrs)
		behindOneURL(t, dsn, dataDir, lbClient(t, url, nil))
	})
	if !balanced {
		t.Run("client round robin", func(t *testing.T) {
			behindOneURL(t, dsn, dataDir, lbClient(t, "http://"+addrs[0], addrs))
		})
	}
	for _, r := range replicas {
		select {
		case <-r.done:
			t.Errorf("replica %s exited during the test (%v):\n%s", r.name, r.err, r.stderr.String())
		default:
		}
	}
}

// behindOneURL drives the replicated member through c, whose requests each replica may serve.
func behindOneURL(t *testing.T, dsn, dataDir string, c *a2aclient.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// Concurrent blocking sends: each completes with its own answer.
	const n = 9
	reqs := make([]*a2ago.SendMessageRequest, n)
	tasks := make([]*a2ago.Task, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		reqs[i] = lbRequest(fmt.Sprintf("task %d", i), false)
		wg.Go(func() { tasks[i], errs[i] = lbSend(ctx, c, reqs[i]) })
	}
	wg.Wait()
	for i, task := range tasks {
		text := fmt.Sprintf("task %d", i)
		if errs[i] != nil {
			t.Fatalf("SendMessage %q through the balancer: %v", text, errs[i])
		}
		if task.Status.State != a2ago.TaskStateCompleted || lbText(task, "response") != "did: "+text {
			t.Errorf("SendMessage %q: %s with %q (status %q); want completed with %q", text, task.Status.State,
				lbText(task, "response"), lbText(task, ""), "did: "+text)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// They ran on more than one replica, each once.
	owners := taskOwners(t, dsn)
	perReplica := map[string]int{}
	for _, task := range tasks {
		perReplica[owners[task.ID]]++
	}
	t.Logf("the %d concurrent tasks ran on the replicas %v", n, perReplica)
	if len(perReplica) < 2 || perReplica[""] > 0 {
		t.Errorf("the %d concurrent tasks ran on %v; want more than one replica, each task owned by one", n, perReplica)
	}
	runs := map[string][]string{} // message text → the replicas whose runs.log has it
	logs, _ := filepath.Glob(filepath.Join(dataDir, "members", "solo", "replicas", "*", "work", "runs.log"))
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		replica := filepath.Base(filepath.Dir(filepath.Dir(p)))
		for line := range strings.Lines(string(b)) {
			runs[strings.TrimSpace(line)] = append(runs[strings.TrimSpace(line)], replica)
		}
	}
	for i, task := range tasks {
		text := fmt.Sprintf("task %d", i)
		if got := runs[text]; len(got) != 1 || got[0] != owners[task.ID] {
			t.Errorf("task %s (%q) ran on %v; want once, on its owner %q", task.ID, text, got, owners[task.ID])
		}
	}

	// GetTask through the balancer answers every task, whichever replica serves it and ran it.
	for round := range 3 {
		for i, task := range tasks {
			got, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("GetTask %s (round %d): %v", task.ID, round, err)
			}
			if got.Status.State != a2ago.TaskStateCompleted || lbText(got, "response") != fmt.Sprintf("did: task %d", i) {
				t.Errorf("GetTask %s (round %d): %s with %q", task.ID, round, got.Status.State, lbText(got, "response"))
			}
		}
	}

	// A retried SendMessage (same messageId) returns the task the first one made, at any replica.
	for i := range 3 {
		again, err := lbSend(ctx, c, reqs[i])
		if err != nil {
			t.Fatalf("SendMessage %q again: %v", fmt.Sprintf("task %d", i), err)
		}
		if again.ID != tasks[i].ID {
			t.Errorf("SendMessage %s again made task %s; want the first's, %s", reqs[i].Message.ID, again.ID, tasks[i].ID)
		}
	}

	// Slow tasks, one per replica, each sent again at once (the first answered, the task stored): the
	// retry, served by another replica, answers with the same task.
	slow := make([]*a2ago.Task, 3)
	for i := range slow {
		req := lbRequest(fmt.Sprintf("slow %d", i), true)
		var err error
		if slow[i], err = lbSend(ctx, c, req); err != nil {
			t.Fatalf("SendMessage %q: %v", fmt.Sprintf("slow %d", i), err)
		}
		if s := slow[i].Status.State; s != a2ago.TaskStateSubmitted && s != a2ago.TaskStateWorking {
			t.Fatalf("slow task %d: %s %q; want it taken", i, s, lbText(slow[i], ""))
		}
		again, err := lbSend(ctx, c, req)
		if err != nil {
			t.Fatalf("SendMessage %q again: %v", fmt.Sprintf("slow %d", i), err)
		}
		if again.ID != slow[i].ID {
			t.Errorf("SendMessage %s sent again made task %s; want the first's, %s", req.Message.ID, again.ID, slow[i].ID)
		}
	}
	for i := range slow {
		id := slow[i].ID
		for {
			got, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
			if err != nil {
				t.Fatalf("GetTask %s: %v", id, err)
			}
			if got.Status.State == a2ago.TaskStateWorking {
				break
			}
			if got.Status.State.Terminal() {
				t.Fatalf("slow task %s ended %s %q before it was canceled", id, got.Status.State, lbText(got, ""))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	owners = taskOwners(t, dsn)
	var slowOwners []string
	for i := range slow {
		slowOwners = append(slowOwners, owners[slow[i].ID])
	}
	slices.Sort(slowOwners)
	t.Logf("the slow tasks run on %v", slowOwners)
	if !slices.Equal(slowOwners, []string{"r1", "r2", "r3"}) {
		t.Errorf("the 3 slow tasks run on %v; want one on each idle replica", slowOwners)
	}
	for i := range slow {
		id := slow[i].ID
		got, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("CancelTask %s (running on %s) through the balancer: %v", id, owners[id], err)
		}
		if got.Status.State != a2ago.TaskStateCanceled {
			t.Errorf("CancelTask %s (running on %s): %s; want canceled", id, owners[id], got.Status.State)
		}
		for round := range 3 {
			got, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
			if err != nil || got.Status.State != a2ago.TaskStateCanceled {
				t.Errorf("GetTask %s after its cancel (round %d): %v %v; want canceled", id, round, err, got)
			}
		}
	}

	// A stream through the balancer follows its task to its end, wherever it runs.
	var last a2ago.Event
	events := 0
	for ev, err := range c.SendStreamingMessage(ctx, lbRequest("streamed", false)) {
		if err != nil {
			t.Fatalf("SendStreamingMessage through the balancer: %v after %d events", err, events)
		}
		events++
		last = ev
	}
	su, ok := last.(*a2ago.TaskStatusUpdateEvent)
	if !ok || su.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("the stream through the balancer ended with %#v after %d events; want the completed status", last, events)
	}
	got, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: su.TaskID})
	if err != nil || lbText(got, "response") != "did: streamed" {
		t.Errorf("GetTask of the streamed task %s: %v %q; want %q", su.TaskID, err, lbText(got, "response"), "did: streamed")
	}

	t.Run("racing copies", func(t *testing.T) { racingCopies(t, ctx, dsn, c) })
}

// racingCopies sends each of three messages twice at once, so that the copies reach two replicas
// before either has stored its task: DESIGN §16 wants one task per messageId. The database holds one
// task per message (a unique index): the copy stored second finds the first's task and answers with it.
func racingCopies(t *testing.T, ctx context.Context, dsn string, c *a2aclient.Client) {
	var wg sync.WaitGroup
	reqs := make([]*a2ago.SendMessageRequest, 3)
	got := make([][2]*a2ago.Task, 3)
	errs := make([][2]error, 3)
	for i := range reqs {
		reqs[i] = lbRequest(fmt.Sprintf("racing %d", i), true)
		for k := range 2 {
			copied := *reqs[i] // a2a-go's client writes the request's tenant: a request of its own to each
			wg.Go(func() { got[i][k], errs[i][k] = lbSend(ctx, c, &copied) })
		}
	}
	wg.Wait()
	owners := taskOwners(t, dsn)
	for i := range reqs {
		if errs[i][0] != nil || errs[i][1] != nil {
			t.Fatalf("SendMessage %q twice at once: %v, %v", fmt.Sprintf("racing %d", i), errs[i][0], errs[i][1])
		}
		if a, b := got[i][0].ID, got[i][1].ID; a != b {
			t.Errorf("SendMessage %s sent twice at once made two tasks: %s (owner %q) and %s (owner %q); want one",
				reqs[i].Message.ID, a, owners[a], b, owners[b])
		}
	}
}

// TestReplicaThatLosesItsLeaseExits: a `mur member` replica whose lease the others no longer hold
// stops: it exits with status 1 and says it lost its lease, for its supervisor to restart it; the
// other replicas go on. Its lease is lost when its row is deleted behind its back, and when it is
// paused (SIGSTOP) for longer than its lease while another replica reaps it, then resumed.
func TestReplicaThatLosesItsLeaseExits(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	rosterPath, dataDir := lbFormation(t, dsn)
	const lease = "MUR_LEASE=1s"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	hasLease := func(name string) bool {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE name = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	mustExitLost := func(r *lbReplica) {
		t.Helper()
		code := r.exited(15 * time.Second)
		if code == -1 {
			t.Fatalf("replica %s still runs 15s after losing its lease", r.name)
		}
		if code != 1 {
			t.Errorf("replica %s exited with status %d after losing its lease; want 1", r.name, code)
		}
		if stderr := r.stderr.String(); !strings.Contains(stderr, "mur: member solo: replica "+r.name+" lost its lease") {
			t.Errorf("replica %s's stderr does not say it lost its lease:\n%s", r.name, stderr)
		}
	}

	t.Run("its lease row deleted", func(t *testing.T) {
		addrs := freeAddrs(t, 1)
		r := startLBReplica(t, rosterPath, dataDir, "gone", addrs[0], lease)
		if !hasLease("gone") {
			t.Fatal("the replica gone has no lease row once its door is open")
		}
		if _, err := conn.Exec(ctx, `DELETE FROM replicas WHERE name = 'gone'`); err != nil {
			t.Fatal(err)
		}
		mustExitLost(r)
	})

	t.Run("paused past its lease", func(t *testing.T) {
		addrs := freeAddrs(t, 2)
		paused := startLBReplica(t, rosterPath, dataDir, "paused", addrs[0], lease)
		other := startLBReplica(t, rosterPath, dataDir, "other", addrs[1], lease)
		if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(15 * time.Second); hasLease("paused"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				paused.cmd.Process.Signal(syscall.SIGCONT)
				t.Fatal("the other replica did not reap the paused one within 15s of a 1s lease")
			}
		}
		if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		mustExitLost(paused)
		// The other replica is unaffected and still answers.
		if code := other.exited(0); code != -1 {
			t.Fatalf("the replica that reaped the paused one exited too (status %d):\n%s", code, other.stderr.String())
		}
		c := lbClient(t, "http://"+other.addr, nil)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		task, err := lbSend(cctx, c, lbRequest("after the pause", false))
		if err != nil || task.Status.State != a2ago.TaskStateCompleted || lbText(task, "response") != "did: after the pause" {
			t.Errorf("a task at the remaining replica: %v %+v", err, task)
		}
	})
}
