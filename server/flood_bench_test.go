package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFlood measures whether a member keeps doing its admitted work while a flood of senders is
// refused. The member is an agent on the script driver answering "echo: …", with task_acceptance: queue
// and queue_size 8, kept busy by benchClients blocking senders. It completes tasks alone, then while
// floodSenders more senders, in a process of their own, send SendMessage as fast as they are answered,
// nearly all of them rejected because the queue is full, then alone again. It reports the completions
// per second alone (the mean of both phases) and under the flood, and their ratio (the goal is at least
// 0.8; it never fails for slowness), the rejections answered per second, and the task store's size
// (the database and its write-ahead log) right after the flood:
//
//	go test -run '^$' -bench Flood -benchtime 2000x ./server/
//
// b.N is the number of completions each phase waits for; a phase also ends after floodPhaseLimit, so a
// member that starves under the flood still gives a number.
func BenchmarkFlood(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": floodAgent})
	url := f.url + "/a2a"
	tr := &http.Transport{MaxIdleConnsPerHost: benchClients + 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	completed := func() float64 {
		resp, err := hc.Get(f.url + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `mur_tasks_total{member="solo",state="TASK_STATE_COMPLETED"} `); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		b.Fatal("no mur_tasks_total for completed tasks in /metrics")
		return 0
	}
	// phase keeps the member busy with benchClients blocking senders until b.N more tasks have completed
	// (or floodPhaseLimit has passed) and returns the completions per second.
	phase := func() float64 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range benchClients {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := sendFlood(hc, url, testOperatorToken, fmt.Sprintf("m%d-%d", c, i), false); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		from, start := completed(), time.Now()
		deadline := start.Add(floodPhaseLimit)
		done := from
		for done-from < float64(b.N) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			done = completed()
		}
		rate := (done - from) / time.Since(start).Seconds()
		close(stop)
		wg.Wait()
		return rate
	}

	b.ResetTimer()
	before := phase()

	flood := exec.Command(os.Args[0], "-test.run=^TestFloodSenders$", "-test.count=1")
	flood.Env = append(os.Environ(), "MUR_FLOOD_URL="+url, "MUR_FLOOD_TOKEN="+testOperatorToken)
	flood.Stderr = os.Stderr
	stopFlood, err := flood.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	report, err := flood.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := flood.Start(); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(report)
	if !lines.Scan() || lines.Text() != "flooding" {
		stopFlood.Close()
		flood.Wait()
		b.Fatalf("the flood did not start: %q", lines.Text())
	}
	floodStart := time.Now()
	flooded := phase()
	floodTime := time.Since(floodStart)
	stopFlood.Close()
	var rejected float64
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "rejected "); ok {
			rejected, _ = strconv.ParseFloat(v, 64)
		}
	}
	if err := flood.Wait(); err != nil {
		b.Fatalf("the flood's process: %v", err)
	}
	var size int64
	db := filepath.Join(filepath.Dir(f.dir), "data", "tasks.db")
	for _, p := range []string{db, db + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	// The member alone again: the mean of both phases is what the flood is compared with, so that a
	// machine that slows down or speeds up meanwhile skews the ratio less.
	alone := (before + phase()) / 2
	b.StopTimer()

	b.ReportMetric(alone, "tasks/s-alone")
	b.ReportMetric(flooded, "tasks/s-flood")
	b.ReportMetric(flooded/alone, "ratio")
	b.ReportMetric(rejected/floodTime.Seconds(), "rejections/s")
	b.ReportMetric(float64(size)/(1<<20), "store-MiB")
}

const (
	floodSenders    = 1000
	floodPhaseLimit = 20 * time.Second
)

const floodAgent = `name: bench
inference:
  driver: local
  choices:
    local: {driver: script}
task_acceptance: queue
queue_size: 8
`

// sendFlood sends one SendMessage and returns the answer's body.
func sendFlood(hc *http.Client, url, token, messageID string, immediately bool) ([]byte, error) {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":"flood"}]},"configuration":{"returnImmediately":%t}}}`,
		messageID, immediately)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// TestFloodSenders is the flood of BenchmarkFlood, in a process of its own as a flood would be: it does
// nothing unless MUR_FLOOD_URL is set. Its floodSenders senders, each on a connection of its own, send
// as fast as they are answered. It prints "flooding" once each has had an answer, floods until its
// stdin closes, then prints "rejected N": the rejections answered from the first line on.
func TestFloodSenders(t *testing.T) {
	url := os.Getenv("MUR_FLOOD_URL")
	if url == "" {
		t.Skip("the flood of BenchmarkFlood; runs only in the process the benchmark starts")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: floodSenders, MaxConnsPerHost: floodSenders}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	stop := make(chan struct{})
	var rejected atomic.Int64
	var counting atomic.Bool
	var started, senders sync.WaitGroup
	for i := range floodSenders {
		started.Add(1)
		senders.Go(func() {
			for n := 0; ; n++ {
				answer, err := sendFlood(hc, url, os.Getenv("MUR_FLOOD_TOKEN"), fmt.Sprintf("f%d-%d", i, n), true)
				if n == 0 {
					started.Done()
				}
				if err != nil {
					t.Error(err)
					return
				}
				if counting.Load() && bytes.Contains(answer, []byte("TASK_STATE_REJECTED")) {
					rejected.Add(1)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	started.Wait()
	counting.Store(true)
	fmt.Println("flooding")
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	senders.Wait()
	fmt.Println("rejected", rejected.Load())
}
