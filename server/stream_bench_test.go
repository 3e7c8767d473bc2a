package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/murmur-run/murmur/a2a"
)

// BenchmarkStreamFanout measures the events per second a door streams to the subscribers of one task
// over loopback: with 1 subscriber (the baseline) and with 100, in the same benchmark. The task's
// progress is published in batches of 128 events (half a subscriber's buffer), each batch once every
// subscriber has read the one before, so no subscriber is dropped and the figure is what the door
// sustains. It reports events/s delivered (all subscribers together) for both and their ratio:
//
//	go test -run '^$' -bench StreamFanout -benchtime 2000x ./server/
func BenchmarkStreamFanout(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	res, err := c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("bench"),
		Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		b.Fatal(err)
	}
	id := a2a.TaskID(res.(*a2ago.Task).ID)
	run := func(subscribers, events int) float64 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got atomic.Int64
		var wg sync.WaitGroup
		tr := &http.Transport{MaxConnsPerHost: 0}
		defer tr.CloseIdleConnections()
		for range subscribers {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/a2a",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+string(id)+`"}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+testOperatorToken)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			if !sc.Scan() { // the task
				b.Fatal("no first event")
			}
			wg.Go(func() {
				defer resp.Body.Close()
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "data: ") {
						got.Add(1)
					}
				}
			})
		}
		for f.hub.Subscribers(id) < subscribers {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		const batch = 128
		for sent := 0; sent < events; {
			n := min(batch, events-sent)
			for i := range n {
				f.hub.Progress(id, "step", map[string]any{"i": sent + i})
			}
			sent += n
			for got.Load() < int64(sent*subscribers) {
				time.Sleep(50 * time.Microsecond)
			}
		}
		rate := float64(events*subscribers) / time.Since(start).Seconds()
		cancel()
		wg.Wait()
		return rate
	}
	b.ResetTimer()
	one := run(1, b.N)
	hundred := run(100, b.N)
	b.StopTimer()
	b.ReportMetric(one, "events/s-1sub")
	b.ReportMetric(hundred, "events/s-100subs")
	b.ReportMetric(hundred/one, "ratio-100-vs-1")
	f.release()
}
