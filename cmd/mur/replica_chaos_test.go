package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
)

// The replica chaos test's knobs: go test ./cmd/mur -run TestReplicaChaos -chaos.replica-kills=100.
var replicaChaosKills = flag.Int("chaos.replica-kills", envInt("MUR_REPLICA_CHAOS_KILLS", 30),
	"SIGKILLs of the replica chaos test's replicas (env MUR_REPLICA_CHAOS_KILLS)")

// The replicated member: each run appends its message to runs.log in its replica's workdir before it
// answers, so a task that ran twice shows twice across the replicas.
const replicaChaosCapsule = `name: solo
script:
  command: [sh, -c, 'read -r line; echo "$line" >> runs.log; sleep 0.05; echo "did: $line"']
task_acceptance: queue
queue_size: 4
`

// chaosReplica is one replica of the chaos member: its name, its fixed address, and its process.
type chaosReplica struct {
	name, addr string
	mu         sync.Mutex
	proc       *memberProc
}

func (r *chaosReplica) url() string { return "http://" + r.addr }

// replicaChaos is the state of one run: the replicas, the tasks acknowledged, and what went wrong.
type replicaChaos struct {
	t                   *testing.T
	replicas            []*chaosReplica
	hc                  *http.Client
	sent                atomic.Int64
	mu                  sync.Mutex
	acked               map[string]a2a.TaskID // message text → the task a door acknowledged for it
	canceled            map[a2a.TaskID]bool   // CancelTask answered the task canceled
	streams, reconnects int
	failures            []string
}

func (c *replicaChaos) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

func (c *replicaChaos) client(r *chaosReplica) *a2a.Client {
	return a2a.NewClient(r.url()+"/a2a", "op", c.hc)
}

func (c *replicaChaos) pick(rng *rand.Rand) *chaosReplica {
	return c.replicas[rng.IntN(len(c.replicas))]
}

// ackedTask is a random acknowledged task, if any.
func (c *replicaChaos) ackedTask(rng *rand.Rand) (a2a.TaskID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.acked) == 0 {
		return "", false
	}
	n := rng.IntN(len(c.acked))
	for _, id := range c.acked {
		if n == 0 {
			return id, true
		}
		n--
	}
	return "", false
}

// TestReplicaChaos: three replicas of one member on one PostgreSQL database, behind their own doors;
// clients spread SendMessage (retrying a send a dead replica did not answer with the same messageId at
// another), SubscribeToTask (reconnecting at another replica with Last-Event-ID when a stream breaks),
// GetTask and CancelTask across them, while a replica is SIGKILLed and restarted at random (30 times by
// default). After the chaos: every acknowledged task is stored and ended (none lost, none still working),
// none ran twice, every stream saw each event of its task exactly once and in order to its end, and
// every task CancelTask answered canceled stays canceled.
func TestReplicaChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the replica chaos test takes a minute")
	}
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(replicaChaosCapsule), 0o644)
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: chaos\nmembers:\n  - name: solo\n    capsule: ./solo\n    replicas: 3\n    store: "+pgtest.URL(t, dsn)+"\n"), 0o644)
	dataDir := filepath.Join(root, "data")
	seed := rand.Uint64()
	t.Logf("seed %d, %d kills", seed, *replicaChaosKills)
	rng := rand.New(rand.NewPCG(seed, 1))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &replicaChaos{t: t, hc: &http.Client{Transport: tr, Timeout: 20 * time.Second},
		acked: map[string]a2a.TaskID{}, canceled: map[a2a.TaskID]bool{}}
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := &chaosReplica{name: fmt.Sprintf("r%d", i+1), addr: ln.Addr().String()}
		ln.Close()
		c.replicas = append(c.replicas, r)
		c.start(r, rosterPath, dataDir)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { c.sender(ctx, rand.New(rand.NewPCG(seed, uint64(10+i))), i) })
	}
	for i := range 2 {
		wg.Go(func() { c.streamer(ctx, rand.New(rand.NewPCG(seed, uint64(20+i)))) })
	}
	wg.Go(func() { c.canceler(ctx, rand.New(rand.NewPCG(seed, 30))) })

	for range *replicaChaosKills {
		time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		r := c.pick(rng)
		r.mu.Lock()
		r.proc.cmd.Process.Signal(syscall.SIGKILL)
		r.proc.cmd.Wait()
		r.mu.Unlock()
		c.start(r, rosterPath, dataDir)
	}
	stop()
	wg.Wait()

	c.check(dataDir)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.failures {
		t.Error(f)
	}
	t.Logf("%d kills; %d sends, %d tasks acknowledged, %d canceled; %d streams followed to their end, %d reconnects",
		*replicaChaosKills, c.sent.Load(), len(c.acked), len(c.canceled), c.streams, c.reconnects)
	if len(c.acked) == 0 || c.streams == 0 {
		t.Error("the chaos acknowledged no task or followed no stream: it tested nothing")
	}
}

// start runs replica r (again) on its address, with a lease of one second.
func (c *replicaChaos) start(r *chaosReplica, rosterPath, dataDir string) {
	p := startMemberFlags(c.t, rosterPath, dataDir, []string{"--replica", r.name, "--listen", r.addr, "--log-level", "error"}, "MUR_LEASE=1s")
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

// sender sends tasks without waiting for them, each to a random replica; a send that gets no answer
// (its replica died) is sent again, with the same messageId, to another, until one answers.
func (c *replicaChaos) sender(ctx context.Context, rng *rand.Rand, who int) {
	for n := 0; ctx.Err() == nil; n++ {
		text := fmt.Sprintf("task %d-%d", who, n)
		req := &a2a.SendMessageRequest{Message: &a2a.Message{MessageID: a2a.MessageID(fmt.Sprintf("m-%d-%d", who, n)), Role: a2a.RoleUser,
			Parts: []a2a.Part{a2a.TextPart(text)}}, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}}
		c.sent.Add(1)
		for try := 0; try < 20; try++ {
			res, err := c.client(c.pick(rng)).SendMessage(context.Background(), req)
			if err != nil {
				var rpc *a2a.Error
				if errors.As(err, &rpc) {
					break // answered, with an error: the door saw it
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if res.Task != nil && res.Task.Status.State != a2a.TaskStateRejected {
				c.mu.Lock()
				if prev, ok := c.acked[text]; ok && prev != res.Task.ID {
					c.failures = append(c.failures, fmt.Sprintf("message %s was answered with task %s, then with %s: a retried send made a second task", req.Message.MessageID, prev, res.Task.ID))
				}
				c.acked[text] = res.Task.ID
				c.mu.Unlock()
			}
			break
		}
		time.Sleep(time.Duration(20+rng.IntN(40)) * time.Millisecond)
	}
}

// canceler cancels a random acknowledged task at a random replica now and then, and reads another.
func (c *replicaChaos) canceler(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		id, ok := c.ackedTask(rng)
		if !ok {
			continue
		}
		got, err := c.client(c.pick(rng)).CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: id})
		if err == nil && got.Status.State == a2a.TaskStateCanceled {
			c.mu.Lock()
			c.canceled[id] = true
			c.mu.Unlock()
		}
		if other, ok := c.ackedTask(rng); ok {
			c.client(c.pick(rng)).GetTask(context.Background(), &a2a.GetTaskRequest{ID: other})
		}
	}
}

// streamer follows random acknowledged tasks to their end, reconnecting at another replica with
// Last-Event-ID whenever a stream breaks, and checks that the events come numbered one after the other.
func (c *replicaChaos) streamer(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		id, ok := c.ackedTask(rng)
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		last, lastEvent := int64(-1), ""
		for tries := 0; tries < 40; tries++ {
			header := ""
			if last >= 0 {
				header = strconv.FormatInt(last, 10)
				c.mu.Lock()
				c.reconnects++
				c.mu.Unlock()
			}
			ended, refused := c.follow(c.pick(rng), id, &last, &lastEvent, header)
			if refused || ended {
				if ended {
					c.mu.Lock()
					c.streams++
					c.mu.Unlock()
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// follow reads one stream of task id at r: the task (when header is "") or what follows event *last.
// It checks each event's number against *last and moves it on. ended: the task's terminal status came;
// refused: the door would not stream the task (it had ended before the first subscription).
func (c *replicaChaos) follow(r *chaosReplica, id a2a.TaskID, last *int64, lastEvent *string, header string) (ended, refused bool) {
	req, _ := http.NewRequest(http.MethodPost, r.url()+"/a2a",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+string(id)+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer op")
	if header != "" {
		req.Header.Set("Last-Event-ID", header)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var evID int64
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			evID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var env struct {
				Result *a2a.StreamResponse `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(data), &env); err != nil {
				c.fail("task %s: an event that is not JSON-RPC: %s", id, data)
				return false, true
			}
			switch {
			case env.Error != nil && *last < 0:
				return false, true // ended before we came: nothing to stream
			case env.Error != nil:
				return false, false // the door shutting down, or slow: come back
			case env.Result.Task != nil:
				if *last >= 0 {
					c.fail("task %s: a stream resumed after event %d began with the task again", id, *last)
				}
				*last = evID
			default:
				if evID != *last+1 {
					c.fail("task %s: event %d after event %d (%s, then %s): a gap or a repeat", id, evID, *last, *lastEvent, data)
				}
				*last, *lastEvent = evID, data
				if su := env.Result.StatusUpdate; su != nil && su.Status.State.Terminal() {
					return true, false
				}
			}
			evID, data = 0, ""
		}
	}
	return false, false
}

// check waits for every acknowledged task to end, then checks the chaos's outcome.
func (c *replicaChaos) check(dataDir string) {
	c.mu.Lock()
	acked := make(map[string]a2a.TaskID, len(c.acked))
	for k, v := range c.acked {
		acked[k] = v
	}
	c.mu.Unlock()
	cl := c.client(c.replicas[0])
	states := map[a2a.TaskID]a2a.TaskState{}
	deadline := time.Now().Add(60 * time.Second)
	for text, id := range acked {
		for {
			got, err := cl.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
			if err == nil && got.Status.State.Terminal() {
				states[id] = got.Status.State
				break
			}
			if time.Now().After(deadline) {
				c.fail("task %s (%q) is not ended a minute after the chaos: %v %v", id, text, got, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	runs := map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(dataDir, "members", "solo", "replicas", "*", "work", "runs.log"))
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		for line := range strings.Lines(string(b)) {
			runs[strings.TrimSpace(line)]++
		}
	}
	if len(logs) == 0 {
		c.fail("no replica wrote runs.log under %s", dataDir)
	}
	for text, id := range acked {
		switch n := runs[text]; {
		case n > 1:
			c.fail("task %s (%q) ran %d times", id, text, n)
		case n == 0 && states[id] == a2a.TaskStateCompleted:
			c.fail("task %s (%q) completed without running", id, text)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.canceled {
		if s := states[id]; s != a2a.TaskStateCanceled && s != "" {
			c.failures = append(c.failures, fmt.Sprintf("task %s was answered canceled, and is now %s", id, s))
		}
	}
}
