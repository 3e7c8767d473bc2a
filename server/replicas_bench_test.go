package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/roster"
)

// The replica benchmarks (DESIGN §16) measure, in one process and one run, what keeping a member's tasks
// in PostgreSQL costs beside the embedded SQLite store, and how a member's throughput grows with its
// replicas. They skip in one line where PostgreSQL is not installed, and never fail for slowness:
//
//	go test -run '^$' -bench 'ReplicaScaling|GetTaskStores' -benchtime 1x ./server/
//
// The agent is a script capsule that answers each task after 50 ms (sleep 0.05; with its two processes'
// starts, about 60 ms on a 2-core VM, which agent-ms measures). A member runs one task at a time, so each
// of its processes completes at most 1/agent-ms tasks a second; whatever keeps it below that is the
// runtime's and its store's.
const replicaBenchAgent = `name: slow
description: answers each task after 50 ms
task_acceptance: queue
queue_size: 32
script:
  command: [sh, -c, '` + replicaBenchCommand + `']
`

// replicaBenchCommand is the agent's command, which the benchmark also times run directly (agent-ms).
const replicaBenchCommand = `read -r line; sleep 0.05; echo "done: $line"`

const (
	// replicaBenchClients is how many closed-loop clients send: enough to keep three replicas' queues
	// full (16 senders over 3 replicas leave about 5 tasks at each).
	replicaBenchClients = 16
	// replicaBenchTasks is how many blocking SendMessages each configuration serves per op.
	replicaBenchTasks = 48
	// getTaskBatch is how many GetTasks each store serves per op.
	getTaskBatch = 2000
)

// benchMember is one member run as one or more processes (each its own formation, as mur member
// starts it), with the a2a URL of each process's door.
type benchMember struct {
	urls []string
	dsn  string // its PostgreSQL database; "" on SQLite
}

// startBenchMember starts the member of capsule body, on SQLite when pg is nil, else on a database of its
// own on pg: as one process when replicas is 0, else as that many replicas named r1, r2, ….
func startBenchMember(b *testing.B, pg *pgtest.Server, replicas int, body string) *benchMember {
	b.Helper()
	root := b.TempDir()
	os.MkdirAll(filepath.Join(root, "solo"), 0o755)
	os.WriteFile(filepath.Join(root, "solo", "murmur.yaml"), []byte(body), 0o644)
	entry := "formation: bench\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n"
	m := &benchMember{}
	if pg != nil {
		m.dsn = pg.NewDatabase(b)
		entry += "    store: " + pgtest.URL(b, m.dsn) + "\n"
	}
	if replicas > 0 {
		entry += "    replicas: " + strconv.Itoa(replicas) + "\n"
	}
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte(entry), 0o644)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range max(1, replicas) {
		name := ""
		if replicas > 0 {
			name = "r" + strconv.Itoa(i+1)
		}
		f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
			Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken}, Version: "bench", Replica: name})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := f.Shutdown(ctx); err != nil {
				b.Error(err)
			}
		})
		m.urls = append(m.urls, f.Members[0].URL+"/a2a")
	}
	return m
}

// owners counts the member's tasks by the replica that ran them, read from its database.
func (m *benchMember) owners(b *testing.B) map[string]int {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), m.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT owner, count(*) FROM tasks GROUP BY owner`)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int{}
	var owner string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&owner, &n}, func() error { out[owner] = n; return nil }); err != nil {
		b.Fatal(err)
	}
	return out
}

// sendSpread sends n blocking SendMessages from clients closed-loop goroutines, the k-th to
// urls[k%len(urls)] (a round-robin load balancer), and returns the time they took. Every answer must be
// the completed task with the agent's answer: a rejected or failed task is an error, not throughput.
func sendSpread(b *testing.B, hc *http.Client, urls []string, clients, n int) time.Duration {
	b.Helper()
	todo := make(chan int, n)
	for k := range n {
		todo <- k
	}
	close(todo)
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for k := range todo {
				i := int(next.Add(1))
				answer, err := post(hc, urls[k%len(urls)], sendBody(i, false))
				if err != nil {
					b.Error(err)
					return
				}
				if !answeredCompleted(answer) || !bytes.Contains(answer, fmt.Appendf(nil, `"done: bench %d"`, i)) {
					b.Errorf("%s answered a blocking SendMessage with %.600s", urls[k%len(urls)], answer)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// agentTime runs the agent's command n times in a row, directly (no member, no confinement), and
// returns the time they took: the floor of a member's time per task.
func agentTime(b *testing.B, n int) time.Duration {
	b.Helper()
	start := time.Now()
	for range n {
		cmd := exec.Command("sh", "-c", replicaBenchCommand)
		cmd.Stdin = strings.NewReader("bench\n")
		if out, err := cmd.Output(); err != nil || string(out) != "done: bench\n" {
			b.Fatalf("the agent's command alone: %q, %v", out, err)
		}
	}
	return time.Since(start)
}

// BenchmarkReplicaScaling sends blocking SendMessages from 16 clients to one member whose agent takes
// 50 ms a task, in the configurations below, all started side by side: on SQLite (the baseline), on
// PostgreSQL as one process, and on PostgreSQL as 1, 2 and 3 replicas behind a round-robin balancer; and
// as 3 replicas with every request sent to the first one's door (a balancer that does not spread: the
// others get only what it has no place for). Each op serves replicaBenchTasks tasks in each configuration
// in turn, so the machine's noise falls on all alike, and times the agent's command run directly
// (agent-ms: a member's floor per task). It reports each configuration's completed tasks a second, each
// PostgreSQL one's ratio to SQLite's, and the time PostgreSQL adds to each task of a one-process member
// (the difference of the two members' times per task; one task runs at a time).
func BenchmarkReplicaScaling(b *testing.B) {
	pg := pgtest.Start(b)
	type config struct {
		name     string
		pg       *pgtest.Server
		replicas int
		oneDoor  bool
		m        *benchMember
		took     time.Duration
		tasks    int
	}
	configs := []*config{
		{name: "sqlite"},
		{name: "pg", pg: pg},
		{name: "pg-1", pg: pg, replicas: 1},
		{name: "pg-2", pg: pg, replicas: 2},
		{name: "pg-3", pg: pg, replicas: 3},
		{name: "pg-3-one-door", pg: pg, replicas: 3, oneDoor: true},
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: replicaBenchClients}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	urls := func(c *config) []string {
		if c.oneDoor {
			return c.m.urls[:1]
		}
		return c.m.urls
	}
	for _, c := range configs {
		c.m = startBenchMember(b, c.pg, c.replicas, replicaBenchAgent)
		sendSpread(b, hc, c.m.urls, len(c.m.urls), len(c.m.urls)) // a first task at each process
	}
	const agentRuns = 8
	b.Run(fmt.Sprintf("clients=%d", replicaBenchClients), func(b *testing.B) {
		var agent time.Duration
		for _, c := range configs {
			c.took, c.tasks = 0, 0
		}
		for range b.N {
			agent += agentTime(b, agentRuns)
			for _, c := range configs {
				c.took += sendSpread(b, hc, urls(c), replicaBenchClients, replicaBenchTasks)
				c.tasks += replicaBenchTasks
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(agent.Milliseconds())/float64(agentRuns*b.N), "agent-ms")
		rate := map[string]float64{}
		for _, c := range configs {
			rate[c.name] = float64(c.tasks) / c.took.Seconds()
			b.ReportMetric(rate[c.name], c.name+"-tasks/s")
		}
		for _, c := range configs[1:] {
			b.ReportMetric(rate[c.name]/rate["sqlite"], c.name+"/sqlite")
		}
		b.ReportMetric((1/rate["pg"]-1/rate["sqlite"])*1000, "pg-extra-ms/task")
		b.ReportMetric(0, "ns/op")
	})
	for _, c := range configs[2:] {
		b.Logf("%s: tasks by the replica that ran them: %v", c.name, c.m.owners(b))
	}
}

// BenchmarkGetTaskStores reads one completed task over and over, from 16 clients, at a member on SQLite
// and at a member on PostgreSQL (one process), getTaskBatch requests each per op in two alternating
// halves, and reports both members' requests a second and their ratio.
func BenchmarkGetTaskStores(b *testing.B) {
	pg := pgtest.Start(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: replicaBenchClients}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	targets := []struct {
		name string
		url  string
		body func(int) []byte
		took time.Duration
		n    int
	}{{name: "sqlite"}, {name: "pg"}}
	for i := range targets {
		t := &targets[i]
		var m *benchMember
		if t.name == "pg" {
			m = startBenchMember(b, pg, 0, echoAgent)
		} else {
			m = startBenchMember(b, nil, 0, echoAgent)
		}
		t.url = m.urls[0]
		id := sendForID(b, hc, t.url, false)
		t.body = func(int) []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, id)
		}
		drive(b, hc, t.url, replicaBenchClients, 200, t.body, nil) // warm: connections, caches
	}
	b.Run(fmt.Sprintf("clients=%d", replicaBenchClients), func(b *testing.B) {
		for i := range targets {
			targets[i].took, targets[i].n = 0, 0
		}
		for range b.N {
			for range 2 {
				for i := range targets {
					t := &targets[i]
					t.took += drive(b, hc, t.url, replicaBenchClients, getTaskBatch/2, t.body, nil)
					t.n += getTaskBatch / 2
				}
			}
		}
		b.StopTimer()
		sqlite := float64(targets[0].n) / targets[0].took.Seconds()
		pgRate := float64(targets[1].n) / targets[1].took.Seconds()
		b.ReportMetric(sqlite, "sqlite-req/s")
		b.ReportMetric(pgRate, "pg-req/s")
		b.ReportMetric(pgRate/sqlite, "pg/sqlite")
		b.ReportMetric((1/pgRate-1/sqlite)*1e6, "pg-extra-µs/req")
		b.ReportMetric(0, "ns/op")
	})
}
