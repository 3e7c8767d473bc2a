package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// The door benchmarks measure, on loopback and in one run, the door's GetTask and SendMessage
// (returnImmediately) against a bare net/http handler that answers the same JSON bytes. Each reports
// requests per second, p50 and p99 latency, and its throughput as a ratio of the bare handler's, measured
// in the same benchmark so machine noise hits both alike:
//
//	go test -run '^$' -bench Door -benchtime 3000x ./server/
const benchClients = 8

const benchAgent = `name: bench
inference:
  driver: local
  choices:
    local: {driver: script}
task_acceptance: queue
queue_size: 1000000
`

// load sends n requests from benchClients goroutines and returns the requests per second and the
// sorted latencies.
func load(b *testing.B, hc *http.Client, url string, n int, body func(i int) []byte) (float64, []time.Duration) {
	b.Helper()
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for i := range next {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body(i)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+testOperatorToken)
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat
}

func pct(lat []time.Duration, p float64) float64 {
	return float64(lat[int(float64(len(lat)-1)*p)].Microseconds())
}

func benchAgainstBare(b *testing.B, f *fixture, body func(i int) []byte) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}}
	defer hc.CloseIdleConnections()
	// The bare handler answers exactly the bytes the door answers for the first request.
	req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a", bytes.NewReader(body(0)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(answer, []byte(`"result"`)) {
		b.Fatalf("the door did not answer the benchmark's request: %s", answer)
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer bare.Close()

	b.ResetTimer()
	bareRPS, _ := load(b, hc, bare.URL, b.N, body)
	doorRPS, lat := load(b, hc, f.url+"/a2a", b.N, body)
	b.StopTimer()
	b.ReportMetric(doorRPS, "req/s")
	b.ReportMetric(bareRPS, "bare-req/s")
	b.ReportMetric(doorRPS/bareRPS, "ratio-vs-bare")
	b.ReportMetric(pct(lat, 0.50), "p50-µs")
	b.ReportMetric(pct(lat, 0.99), "p99-µs")
}

// BenchmarkDoorGetTask reads one completed task over and over.
func BenchmarkDoorGetTask(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": benchAgent})
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	id := sendForID(b, hc, f.url+"/a2a", false)
	benchAgainstBare(b, f, func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, id)
	})
}

// BenchmarkDoorSendMessage creates a task per request (returnImmediately: the answer is the acknowledged,
// committed task).
func BenchmarkDoorSendMessage(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": benchAgent})
	benchAgainstBare(b, f, func(i int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m%d","role":"ROLE_USER","parts":[{"text":"bench"}]},"configuration":{"returnImmediately":true}}}`, i)
	})
}

// BenchmarkDoorSendBlocking sends b.N blocking SendMessages from 16 closed-loop clients to one door
// alone, and reports its requests a second: the door's own pace, for a CPU profile or an execution
// trace of it, or two builds of it run in turn (docs/benchmarks.md), without the other servers of
// BenchmarkVersus in the same process.
func BenchmarkDoorSendBlocking(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": benchAgent})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	b.ResetTimer()
	d := drive(b, hc, f.url+"/a2a", 16, b.N, func(i int) []byte { return sendBody(i, false) }, nil)
	b.ReportMetric(float64(b.N)/d.Seconds(), "req/s")
}
