package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/murmur-run/murmur/a2a"
)

// BenchmarkVersus runs, in one process and one run, the same JSON-RPC requests against four servers on
// loopback: a bare net/http handler that answers fixed bytes (the floor any server pays: HTTP and the
// loopback socket), a2a-go v2.3.1's a2asrv with its in-memory task store and a trivial agent, a murmur
// door in front of a member whose agent is the script driver, its tasks in SQLite, and the same door with
// its tasks in PostgreSQL (left out, in one line of the log, where PostgreSQL is not installed). Each call
// is measured at 1, 16 and 64 closed-loop clients, the targets alternating over versusRounds rounds so
// that the machine's noise falls on all alike; it reports each target's requests per second and the
// doors' ratios: door/bare and door/a2asrv for the door on SQLite, door-pg/a2asrv and door-pg/door (÷ the
// door on SQLite) for the one on PostgreSQL. It never fails for slowness:
//
//	go test -run '^$' -bench Versus -benchtime 3000x ./server/
//
// With MUR_BENCH_PG_ONLY=1 it drives the door on PostgreSQL alone (reporting its requests per second and
// latency, no ratios), for a profile of that door or a comparison of two builds of it.
//
// The calls: GetTask of a completed task, and of one written before 10,000 others; SendMessage blocking (the answer is the completed task);
// SendMessage with returnImmediately, timed until every task it acknowledged has completed (the drain),
// so that an acknowledgement that only queues work does not pass for throughput.
func BenchmarkVersus(b *testing.B) {
	door := startDoor(b, map[string]string{"murmur.yaml": benchAgent})
	agent := startA2ASrv(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	pg := benchPG(b)
	pgOnly := os.Getenv("MUR_BENCH_PG_ONLY") != ""
	if pgOnly && pg == nil {
		b.Skip("MUR_BENCH_PG_ONLY asks for the door on PostgreSQL alone, and PostgreSQL is not installed")
	}

	doorTask := sendForID(b, hc, door.url+"/a2a", false)
	agentTask := sendForID(b, hc, agent.url, false)
	// GetTask of a task written before 10,000 others, past the store's cache of recent tasks: its first
	// read is the file's (issue 34). Its member keeps more than the default 10,000 ended tasks.
	oldAgent := benchAgent + "store: {retention: {max_tasks: 100000}}\n"
	old := startDoor(b, map[string]string{"murmur.yaml": oldAgent})
	oldDoorTask := sendForID(b, hc, old.url+"/a2a", false)
	oldAgentTask := sendForID(b, hc, agent.url, false)
	if !pgOnly {
		drive(b, hc, old.url+"/a2a", 16, 10000, func(i int) []byte { return sendBody(i, true) }, nil)
		drainDoor(b, hc, old)
	}
	// The same two doors on PostgreSQL.
	var pgDoor, pgOld *fixture
	var pgTask, pgOldTask string
	if pg != nil {
		pgDoor = startDoorPG(b, pg, map[string]string{"murmur.yaml": benchAgent})
		pgTask = sendForID(b, hc, pgDoor.url+"/a2a", false)
		pgOld = startDoorPG(b, pg, map[string]string{"murmur.yaml": oldAgent})
		pgOldTask = sendForID(b, hc, pgOld.url+"/a2a", false)
		drive(b, hc, pgOld.url+"/a2a", 16, 10000, func(i int) []byte { return sendBody(i, true) }, nil)
		drainDoor(b, hc, pgOld)
	}
	getTask := func(id string) func(int) []byte {
		return func(int) []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, id)
		}
	}
	send := func(immediately bool) func(int) []byte {
		return func(i int) []byte { return sendBody(i, immediately) }
	}
	calls := []struct {
		name        string
		door        *fixture
		doorBody    func(int) []byte
		agentBody   func(int) []byte
		pgDoor      *fixture // nil without PostgreSQL
		pgBody      func(int) []byte
		immediately bool
	}{
		{"GetTask", door, getTask(doorTask), getTask(agentTask), pgDoor, getTask(pgTask), false},
		{"GetTaskAfter10kWrites", old, getTask(oldDoorTask), getTask(oldAgentTask), pgOld, getTask(pgOldTask), false},
		{"SendBlocking", door, send(false), send(false), pgDoor, send(false), false},
		{"SendImmediateDrained", door, send(true), send(true), pgDoor, send(true), true},
	}
	for _, call := range calls {
		door := call.door
		if pgOnly {
			for _, clients := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("%s/clients=%d", call.name, clients), func(b *testing.B) {
					var pgT time.Duration
					var pgLat []time.Duration
					per := max(1, b.N/versusRounds)
					for range versusRounds {
						pgT += drive(b, hc, call.pgDoor.url+"/a2a", clients, per, call.pgBody, &pgLat)
						if call.immediately {
							pgT += drainDoor(b, hc, call.pgDoor)
						}
					}
					slices.Sort(pgLat)
					b.ReportMetric(float64(per*versusRounds)/pgT.Seconds(), "door-pg-req/s")
					b.ReportMetric(pct(pgLat, 0.50), "door-pg-p50-µs")
					b.ReportMetric(0, "ns/op")
				})
			}
			continue
		}
		bare := bareHandler(b, hc, door.url+"/a2a", call.doorBody(0))
		for _, clients := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", call.name, clients), func(b *testing.B) {
				var bareT, agentT, doorT, pgT time.Duration
				var lat, pgLat []time.Duration
				per := max(1, b.N/versusRounds)
				for range versusRounds {
					bareT += drive(b, hc, bare.URL, clients, per, call.doorBody, nil)
					agentT += drive(b, hc, agent.url, clients, per, call.agentBody, nil)
					if call.immediately {
						agentT += agent.drain(b)
					}
					doorT += drive(b, hc, door.url+"/a2a", clients, per, call.doorBody, &lat)
					if call.immediately {
						doorT += drainDoor(b, hc, door)
					}
					if call.pgDoor != nil {
						pgT += drive(b, hc, call.pgDoor.url+"/a2a", clients, per, call.pgBody, &pgLat)
						if call.immediately {
							pgT += drainDoor(b, hc, call.pgDoor)
						}
					}
				}
				n := float64(per * versusRounds)
				bareRPS, agentRPS, doorRPS := n/bareT.Seconds(), n/agentT.Seconds(), n/doorT.Seconds()
				slices.Sort(lat)
				b.ReportMetric(doorRPS, "door-req/s")
				b.ReportMetric(agentRPS, "a2asrv-req/s")
				b.ReportMetric(bareRPS, "bare-req/s")
				b.ReportMetric(doorRPS/bareRPS, "door/bare")
				b.ReportMetric(doorRPS/agentRPS, "door/a2asrv")
				b.ReportMetric(pct(lat, 0.50), "door-p50-µs")
				b.ReportMetric(pct(lat, 0.99), "door-p99-µs")
				if call.pgDoor != nil {
					pgRPS := n / pgT.Seconds()
					slices.Sort(pgLat)
					b.ReportMetric(pgRPS, "door-pg-req/s")
					b.ReportMetric(pgRPS/agentRPS, "door-pg/a2asrv")
					b.ReportMetric(pgRPS/doorRPS, "door-pg/door")
					b.ReportMetric(pct(pgLat, 0.50), "door-pg-p50-µs")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
		bare.Close()
	}
}

// versusRounds is how many times the three targets take turns within one measurement.
const versusRounds = 3

func sendBody(i int, immediately bool) []byte {
	conf := ""
	if immediately {
		conf = `,"configuration":{"returnImmediately":true}`
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m%d","role":"ROLE_USER","parts":[{"text":"bench %d"}]}%s}}`, i, i, i, conf)
}

// post sends one JSON-RPC body and returns the answer.
func post(hc *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	req.Header.Set("A2A-Version", "1.0")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// sendForID sends one message and returns the id of the task it answered with.
func sendForID(b *testing.B, hc *http.Client, url string, immediately bool) string {
	b.Helper()
	answer, err := post(hc, url, sendBody(0, immediately))
	if err != nil {
		b.Fatal(err)
	}
	var rep struct {
		Result struct {
			Task struct {
				ID     string `json:"id"`
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &rep); err != nil || rep.Result.Task.ID == "" {
		b.Fatalf("%s answered SendMessage with %s", url, answer)
	}
	if !immediately && rep.Result.Task.Status.State != string(a2a.TaskStateCompleted) {
		b.Fatalf("%s answered a blocking SendMessage with a task in state %s: %s", url, rep.Result.Task.Status.State, answer)
	}
	return rep.Result.Task.ID
}

// bareHandler serves, for any request, the bytes the door answers body with.
func bareHandler(b *testing.B, hc *http.Client, doorURL string, body []byte) *httptest.Server {
	b.Helper()
	answer, err := post(hc, doorURL, body)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Contains(answer, []byte(`"result"`)) {
		b.Fatalf("the door did not answer the benchmark's request: %s", answer)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
}

// next numbers the benchmark's requests across rounds and targets, so every message id is new.
var next atomic.Int64

// drive sends n requests from clients closed-loop goroutines and returns the time they took; with lat it
// keeps each request's latency. Every answer must be a JSON-RPC result.
func drive(b *testing.B, hc *http.Client, url string, clients, n int, body func(int) []byte, lat *[]time.Duration) time.Duration {
	b.Helper()
	return driveChecked(b, hc, url, clients, n, body, func(_ int, answer []byte) bool {
		return bytes.Contains(answer, []byte(`"result"`))
	}, lat)
}

// answeredCompleted reports whether answer is a SendMessage's result holding a completed task.
func answeredCompleted(answer []byte) bool {
	var rep struct {
		Result struct {
			Task struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	return json.Unmarshal(answer, &rep) == nil && rep.Result.Task.Status.State == string(a2a.TaskStateCompleted)
}

// driveChecked is drive with its own check of each answer to request i: an answer ok refuses fails the
// benchmark with it.
func driveChecked(b *testing.B, hc *http.Client, url string, clients, n int, body func(int) []byte, ok func(i int, answer []byte) bool, lat *[]time.Duration) time.Duration {
	b.Helper()
	todo := make(chan int, n)
	for range n {
		todo <- int(next.Add(1))
	}
	close(todo)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for i := range todo {
				t0 := time.Now()
				answer, err := post(hc, url, body(i))
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				if !ok(i, answer) {
					b.Errorf("%s answered %.800s", url, answer)
					return
				}
			}
			if lat != nil {
				mu.Lock()
				*lat = append(*lat, mine...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// drainDoor waits until the member has run every task queued before it was called, and returns how long
// that took: it sends one more task and waits for it, since a member runs its tasks in order of arrival.
func drainDoor(b *testing.B, hc *http.Client, f *fixture) time.Duration {
	b.Helper()
	start := time.Now()
	id := sendForID(b, hc, f.url+"/a2a", true)
	t, err := f.session.Wait(context.Background(), a2a.TaskID(id))
	if err != nil || t.Status.State != a2a.TaskStateCompleted {
		b.Fatalf("the drain's last task: %v %v", t, err)
	}
	return time.Since(start)
}

// a2aSrv is a2a-go's server with a trivial agent: it answers every message with a completed task
// carrying the text back, through the in-memory task store.
type a2aSrv struct {
	url      string
	started  atomic.Int64
	finished atomic.Int64
	done     chan struct{} // capacity 1: a task finished
}

func startA2ASrv(b *testing.B) *a2aSrv {
	a := &a2aSrv{done: make(chan struct{}, 1)}
	h := a2asrv.NewHandler(a, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(h))
	b.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// Execute is the trivial agent: submitted, working, then completed with the message's text as the answer.
func (a *a2aSrv) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2ago.Event, error] {
	a.started.Add(1)
	return func(yield func(a2ago.Event, error) bool) {
		if !yield(a2ago.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2ago.NewStatusUpdateEvent(ec, a2ago.TaskStateWorking, nil), nil) {
			return
		}
		text := ""
		if len(ec.Message.Parts) > 0 {
			text = ec.Message.Parts[0].Text()
		}
		yield(a2ago.NewStatusUpdateEvent(ec, a2ago.TaskStateCompleted, a2ago.NewMessageForTask(a2ago.MessageRoleAgent, ec, a2ago.NewTextPart("echo: "+text))), nil)
	}
}

// Cleanup counts a finished execution.
func (a *a2aSrv) Cleanup(context.Context, *a2asrv.ExecutorContext, a2ago.SendMessageResult, error) {
	a.finished.Add(1)
	select {
	case a.done <- struct{}{}:
	default:
	}
}

// Cancel cancels.
func (a *a2aSrv) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2ago.Event, error] {
	return func(yield func(a2ago.Event, error) bool) {
		yield(a2ago.NewStatusUpdateEvent(ec, a2ago.TaskStateCanceled, nil), nil)
	}
}

// drain waits until every execution started has finished and returns how long that took.
func (a *a2aSrv) drain(b *testing.B) time.Duration {
	start := time.Now()
	for a.finished.Load() < a.started.Load() {
		select {
		case <-a.done:
		case <-time.After(10 * time.Millisecond):
		}
	}
	return time.Since(start)
}

// BenchmarkFormationSend sends blocking SendMessages to a formation of 4 members (4 doors, each with its
// own store, in one process), spread evenly over them, from 1 closed-loop client and then from 16, and
// reports both rates and their ratio (the goal: at least 2). The same 4 doors on PostgreSQL (each member a
// database of its own) take turns with them, round by round, and their rates, 16/1 and ratios to the
// doors on SQLite are reported beside (left out where PostgreSQL is not installed):
//
//	go test -run '^$' -bench FormationSend -benchtime 2000x ./server/
func BenchmarkFormationSend(b *testing.B) {
	pg := benchPG(b)
	var urls, pgURLs []string
	for range 4 {
		urls = append(urls, startDoor(b, map[string]string{"murmur.yaml": benchAgent}).url+"/a2a")
		if pg != nil {
			pgURLs = append(pgURLs, startDoorPG(b, pg, map[string]string{"murmur.yaml": benchAgent}).url+"/a2a")
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer hc.CloseIdleConnections()
	per := max(1, b.N/len(urls)/versusRounds)
	// round sends per*len(urls) messages to urls from clients and returns the time they took.
	round := func(urls []string, clients int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for i, url := range urls {
			// clients spread over the members: 1 client visits them in turn, 16 give each 4.
			n := max(1, clients/len(urls))
			if clients < len(urls) && i > 0 {
				continue
			}
			wg.Go(func() {
				drive(b, hc, url, n, per*max(1, len(urls)/clients), func(i int) []byte { return sendBody(i, false) }, nil)
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// rates alternates the two formations round by round and returns each one's messages a second.
	rates := func(clients int) (sqlite, onPG float64) {
		var took, pgTook time.Duration
		for range versusRounds {
			took += round(urls, clients)
			if pgURLs != nil {
				pgTook += round(pgURLs, clients)
			}
		}
		n := float64(per * len(urls) * versusRounds)
		return n / took.Seconds(), n / pgTook.Seconds()
	}
	b.ResetTimer()
	one, pgOne := rates(1)
	sixteen, pgSixteen := rates(16)
	b.StopTimer()
	b.ReportMetric(one, "req/s-1-client")
	b.ReportMetric(sixteen, "req/s-16-clients")
	b.ReportMetric(sixteen/one, "16/1")
	if pgURLs != nil {
		b.ReportMetric(pgOne, "pg-req/s-1-client")
		b.ReportMetric(pgSixteen, "pg-req/s-16-clients")
		b.ReportMetric(pgSixteen/pgOne, "pg-16/1")
		b.ReportMetric(pgOne/one, "pg/sqlite-1-client")
		b.ReportMetric(pgSixteen/sixteen, "pg/sqlite-16-clients")
	}
	b.ReportMetric(0, "ns/op")
}
