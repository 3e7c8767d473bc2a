package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
)

// BenchmarkStreamVersus runs SendStreamingMessage, in one process and one run, against a2a-go v2.3.1's
// a2asrv (its in-memory store, the trivial agent of BenchmarkVersus: submitted, working, completed), a
// door in front of a member on the script driver (durable: each task stored before its first event) on
// SQLite, and the same door on PostgreSQL (left out where PostgreSQL is not installed), taking turns over
// versusRounds rounds, at 1 and 16 closed-loop clients. Each stream is read to its end. It reports
// streams and events per second for each, the doors' ratios (door/a2asrv; door-pg/a2asrv and
// door-pg/door, ÷ the door on SQLite), and the time to the first event (p50) of each. It never fails
// for slowness:
//
//	go test -run '^$' -bench StreamVersus -benchtime 600x ./server/
func BenchmarkStreamVersus(b *testing.B) {
	door := startDoor(b, map[string]string{"murmur.yaml": benchAgent})
	agent := startA2ASrv(b)
	var pgDoor *fixture
	if pg := benchPG(b); pg != nil {
		pgDoor = startDoorPG(b, pg, map[string]string{"murmur.yaml": benchAgent})
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"SendStreamingMessage","params":{"message":{"messageId":"s%d","role":"ROLE_USER","parts":[{"text":"bench %d"}]}}}`, i, i, i)
	}
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			per := max(1, b.N/versusRounds)
			var doorT, agentT, pgT time.Duration
			var doorEvents, agentEvents, pgEvents int64
			var doorFirst, agentFirst, pgFirst []time.Duration
			for range versusRounds {
				t, n := driveStreams(b, hc, agent.url, clients, per, body, &agentFirst)
				agentT, agentEvents = agentT+t, agentEvents+n
				t, n = driveStreams(b, hc, door.url+"/a2a", clients, per, body, &doorFirst)
				doorT, doorEvents = doorT+t, doorEvents+n
				if pgDoor != nil {
					t, n = driveStreams(b, hc, pgDoor.url+"/a2a", clients, per, body, &pgFirst)
					pgT, pgEvents = pgT+t, pgEvents+n
				}
			}
			streams := float64(per * versusRounds)
			slices.Sort(doorFirst)
			slices.Sort(agentFirst)
			b.ReportMetric(streams/doorT.Seconds(), "door-streams/s")
			b.ReportMetric(streams/agentT.Seconds(), "a2asrv-streams/s")
			b.ReportMetric(agentT.Seconds()/doorT.Seconds(), "door/a2asrv")
			b.ReportMetric(float64(doorEvents)/doorT.Seconds(), "door-events/s")
			b.ReportMetric(float64(agentEvents)/agentT.Seconds(), "a2asrv-events/s")
			b.ReportMetric(pct(doorFirst, 0.50), "door-first-event-p50-µs")
			b.ReportMetric(pct(agentFirst, 0.50), "a2asrv-first-event-p50-µs")
			if pgDoor != nil {
				slices.Sort(pgFirst)
				b.ReportMetric(streams/pgT.Seconds(), "door-pg-streams/s")
				b.ReportMetric(agentT.Seconds()/pgT.Seconds(), "door-pg/a2asrv")
				b.ReportMetric(doorT.Seconds()/pgT.Seconds(), "door-pg/door")
				b.ReportMetric(float64(pgEvents)/pgT.Seconds(), "door-pg-events/s")
				b.ReportMetric(pct(pgFirst, 0.50), "door-pg-first-event-p50-µs")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// driveStreams opens n streams from clients goroutines, each read to its end, and returns how long that
// took and how many events came; first gets each stream's time to its first event.
func driveStreams(b *testing.B, hc *http.Client, url string, clients, n int, body func(int) []byte, first *[]time.Duration) (time.Duration, int64) {
	b.Helper()
	todo := make(chan int, n)
	for range n {
		todo <- int(next.Add(1))
	}
	close(todo)
	var events atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for i := range todo {
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body(i)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Authorization", "Bearer "+testOperatorToken)
				req.Header.Set("A2A-Version", "1.0")
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				sc := bufio.NewScanner(resp.Body)
				got, last := 0, ""
				for sc.Scan() {
					if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
						if got == 0 {
							mine = append(mine, time.Since(t0))
						}
						got++
						last = data
					}
				}
				resp.Body.Close()
				if got == 0 || !strings.Contains(last, "COMPLETED") {
					b.Errorf("%s: a stream of %d events ended with %s", url, got, last)
					return
				}
				events.Add(int64(got))
			}
			mu.Lock()
			*first = append(*first, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return time.Since(start), events.Load()
}

// BenchmarkSubscribers opens 1,000 SubscribeToTask streams on one task of one member (each its own
// connection, read by its own goroutine, as 1,000 clients would) and reports what they cost the process
// (heap in use and goroutines per stream, measured in the same process before and after) and how long
// the task's end takes to reach all of them (from the task's release to the last subscriber reading its
// final event). It does so on a member on SQLite, then on one on PostgreSQL (the pg- metrics; left out
// where PostgreSQL is not installed), in turn within each op. It never fails for slowness:
//
//	go test -run '^$' -bench Subscribers -benchtime 1x ./server/
func BenchmarkSubscribers(b *testing.B) {
	type target struct {
		prefix                string
		f                     *fixture
		heap, routines, toAll float64 // summed over the ops
	}
	targets := []*target{{f: startDoor(b, map[string]string{"murmur.yaml": gatedScript})}}
	if pg := benchPG(b); pg != nil {
		targets = append(targets, &target{prefix: "pg-", f: startDoorPG(b, pg, map[string]string{"murmur.yaml": gatedScript})})
	}
	for range b.N {
		for _, t := range targets {
			heap, routines, toAll := subscribeAll(b, t.f, 1000)
			t.heap, t.routines, t.toAll = t.heap+heap, t.routines+routines, t.toAll+toAll
		}
	}
	for _, t := range targets {
		b.ReportMetric(t.heap/float64(b.N), t.prefix+"KiB-heap/stream")
		b.ReportMetric(t.routines/float64(b.N), t.prefix+"goroutines/stream")
		b.ReportMetric(t.toAll/float64(b.N), t.prefix+"ms-end-to-all")
	}
	if len(targets) > 1 {
		b.ReportMetric(targets[1].toAll/targets[0].toAll, "pg/sqlite-end-to-all")
	}
	b.ReportMetric(0, "ns/op")
}

// subscribeAll opens subscribers SubscribeToTask streams on a new task of f's gated member, releases
// the task, and returns the heap (KiB) and goroutines each stream cost and the milliseconds from the
// release to the last subscriber reading COMPLETED.
func subscribeAll(b *testing.B, f *fixture, subscribers int) (kibPerStream, goroutinesPerStream, msToAll float64) {
	b.Helper()
	c := f.client(testOperatorToken)
	res, err := c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("bench"),
		Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		b.Fatal(err)
	}
	id := a2a.TaskID(res.(*a2ago.Task).ID)
	tr := &http.Transport{MaxIdleConnsPerHost: subscribers}
	heap0, routines0 := heapInUse(), runtime.NumGoroutine()
	var ended sync.WaitGroup
	var last atomic.Int64
	for range subscribers {
		req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+string(id)+`"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() { // the task as it stands: the stream is open
			b.Fatal("no first event")
		}
		ended.Go(func() {
			defer resp.Body.Close()
			for sc.Scan() {
				if strings.Contains(sc.Text(), "COMPLETED") {
					last.Store(time.Now().UnixNano())
				}
			}
		})
	}
	heap1, routines1 := heapInUse(), runtime.NumGoroutine()
	start := time.Now()
	if err := os.WriteFile(filepath.Join(f.dir, "go"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	ended.Wait()
	os.Remove(filepath.Join(f.dir, "go"))
	tr.CloseIdleConnections()
	if last.Load() == 0 {
		b.Fatal("no subscriber saw the task complete")
	}
	return float64(heap1-heap0) / float64(subscribers) / 1024, float64(routines1-routines0) / float64(subscribers),
		float64(time.Unix(0, last.Load()).Sub(start).Microseconds()) / 1000
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// BenchmarkMemberCall measures what call-member adds to a task, in one formation and one run: blocking
// SendMessages, one after another, to lead (three turns of the script driver: a call-member to worker,
// "waiting", the answer), to solo (the same three turns with a local tool, session-status, in place of
// the call) and to worker directly, the three taking turns. What a call costs over a local tool is lead's
// minus solo's, beside worker's direct send (what the same task costs sent by the operator): the call's
// send, its wait for worker's answer (SPEC's GetTask poll every 500 ms bounds how late it is seen) and
// the answer resuming lead. It reports the three medians and that difference. The same formation with
// every member's tasks in PostgreSQL (a database each) takes its turns beside it, and its medians are
// reported with the pg- prefix, with pg/sqlite, lead's median on PostgreSQL ÷ on SQLite (left out where
// PostgreSQL is not installed). It never fails for slowness:
//
//	go test -run '^$' -bench MemberCall -benchtime 20x ./server/
func BenchmarkMemberCall(b *testing.B) {
	// lead reaches worker's door on loopback only with localhost in its network allowlist; without it
	// every call fails unsent and lead answers "waiting" (as this benchmark measured before it checked
	// the answers).
	agent := func(name string) string {
		return "name: " + name + "\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ncapabilities: {network: {allow: [localhost]}}\n"
	}
	files := func(store func() string) map[string]string {
		entry := func(name string) string {
			e := "  - {name: " + name + ", capsule: ./" + name + ", listen: '127.0.0.1:0'"
			if url := store(); url != "" {
				e += ", store: '" + url + "'"
			}
			return e + "}\n"
		}
		return map[string]string{
			"roster.yaml":        "formation: f\nmembers:\n" + entry("lead") + entry("solo") + entry("worker") + "reach:\n  - {from: lead, to: [worker]}\n",
			"lead/murmur.yaml":   agent("lead"),
			"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{(index .answers 0).output}}'\n",
			"solo/murmur.yaml":   agent("solo"),
			"solo/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: session-status}]\n      - say: looked\n      - say: '{{.task}}'\n",
			"worker/murmur.yaml": agent("worker"),
			"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'worker: {{.task}}'\n",
		}
	}
	tokens := Tokens{Operator: testOperatorToken, Formation: "fm"}
	formations := map[string]*formationFixture{"": startFormationWith(b, files(func() string { return "" }), tokens, func(*FormationConfig) {})}
	prefixes := []string{""}
	if pg := benchPG(b); pg != nil {
		formations["pg-"] = startFormationWith(b, files(func() string { return pgtest.URL(b, pg.NewDatabase(b)) }), tokens, func(*FormationConfig) {})
		prefixes = append(prefixes, "pg-")
	}
	// The three take turns, and the two formations, so the machine's noise falls on all of them alike.
	lat := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		for _, prefix := range prefixes {
			for _, member := range []string{"lead", "solo", "worker"} {
				t0 := time.Now()
				task := formations[prefix].ask(b, member, fmt.Sprintf("q%d", i))
				lat[prefix+member] = append(lat[prefix+member], time.Since(t0))
				// Every answer must be the whole round's: lead's is worker's answer, come back through the call
				// (solo's "looked" ends its task: a local tool's result needs no continuation).
				want := fmt.Sprintf("worker: q%d", i)
				if member == "solo" {
					want = "looked"
				}
				if task.Status.State != a2a.TaskStateCompleted || answerOf(task) != want {
					b.Fatalf("%s%s's task %s: %q, want %q", prefix, member, task.Status.State, answerOf(task), want)
				}
			}
		}
	}
	b.StopTimer()
	median := func(member string) float64 {
		l := lat[member]
		slices.Sort(l)
		return float64(l[len(l)/2].Microseconds()) / 1000
	}
	for _, prefix := range prefixes {
		lead, solo, worker := median(prefix+"lead"), median(prefix+"solo"), median(prefix+"worker")
		b.ReportMetric(lead, prefix+"ms-lead-calls-worker")
		b.ReportMetric(solo, prefix+"ms-solo-local-tool")
		b.ReportMetric(worker, prefix+"ms-worker-direct")
		b.ReportMetric(lead-solo, prefix+"ms-call-over-local-tool")
	}
	if len(prefixes) > 1 {
		b.ReportMetric(median("pg-lead")/median("lead"), "pg/sqlite-lead")
	}
	b.ReportMetric(0, "ns/op")
}
