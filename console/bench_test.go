package console

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkConsoleOverhead measures what a console that watches costs the formation: blocking
// SendMessage round trips to lead ("hello"), first with no page open (the console reads every 5 s), then
// with a page's event stream open (the console reads the doors and the records every 500 ms, and pushes
// every change), both at DefaultPoll. It reports the second's time per task as a ratio of the first's, from the same run.
func BenchmarkConsoleOverhead(b *testing.B) {
	testPoll = DefaultPoll
	defer func() { testPoll = 100 * time.Millisecond }()
	h := startHello(b, false)
	measure := func() time.Duration {
		start := time.Now()
		for range b.N {
			h.send("lead", "hello")
		}
		return time.Since(start)
	}
	b.ResetTimer()
	idle := measure()

	br := newBrowser(b, h.base)
	br.login(h.console)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/events", nil)
	res, err := br.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	events := make(chan int, 1)
	go func() { // the page reads its stream as a browser would
		n := 0
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event:") {
				n++
			}
		}
		events <- n
	}()
	watched := measure()
	b.StopTimer()
	cancel()
	res.Body.Close()
	n := <-events
	b.ReportMetric(float64(watched)/float64(idle), "watched/idle")
	b.ReportMetric(float64(n)/float64(b.N), "events/task")
}
