package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkShutdown queues 20,000 tasks (SendMessage with returnImmediately, over loopback) behind one
// that runs until it is canceled, and times the session's Close, which ends every queued task canceled
// (the goal: under a second; it never fails for slowness):
//
//	go test -run '^$' -bench Shutdown -benchtime 1x ./server/
func BenchmarkShutdown(b *testing.B) {
	const queued = 20_000
	for range b.N {
		b.StopTimer()
		f := startDoor(b, map[string]string{"murmur.yaml": strings.Replace(gatedScript, "\n", "\ntask_acceptance: queue\nqueue_size: 100000\n", 1)})
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		drive(b, hc, f.url+"/a2a", 64, queued+1, func(i int) []byte { return sendBody(i, true) }, nil)
		hc.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.StartTimer()
		start := time.Now()
		if err := f.session.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/close")
		cancel()
	}
	b.ReportMetric(0, "ns/op")
}
