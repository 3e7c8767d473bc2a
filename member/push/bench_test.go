package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
)

// BenchmarkPushDeliveries measures push deliveries per second to a webhook on loopback: b.N tasks, one
// config each, all completing at once, reported to the notifier as the hub reports them; each change is
// written to the outbox, read back, posted and deleted. The baseline, in the same benchmark, is the same number of bare POSTs of a
// task's JSON to the same webhook from as many goroutines as the notifier delivers with at once; it
// reports both rates and their ratio:
//
//	go test -run '^$' -bench PushDeliveries -benchtime 2000x ./member/push/
func BenchmarkPushDeliveries(b *testing.B) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer srv.Close()
	path, db := taskDBAt(b)
	n := open(b, path, Config{Queue: b.N, ConfigsPerCaller: b.N}) // every change written to the outbox, none merged
	defer n.Close()
	ctx := context.Background()
	for i := range b.N {
		id := fmt.Sprintf("tsk_%06d", i)
		storeTaskB(b, db, id, a2a.TaskStateWorking)
		if _, err := n.Create(ctx, "", a2a.TaskPushNotificationConfig{TaskID: a2a.TaskID(id), URL: srv.URL}); err != nil {
			b.Fatal(err)
		}
	}
	for got.Load() < int64(b.N) { // every config gets the WORKING task first
		time.Sleep(time.Millisecond)
	}
	got.Store(0)
	tx, _ := db.Begin()
	done := make([]*a2a.Task, b.N)
	for i := range b.N {
		done[i] = &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("tsk_%06d", i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		body, _ := json.Marshal(done[i])
		tx.Exec(`UPDATE tasks SET task = ? WHERE id = ?`, string(body), string(done[i].ID))
	}
	tx.Commit()
	b.ResetTimer()
	start := time.Now()
	for _, t := range done { // as the hub reports each change the store made
		n.Changed(events.Change{TaskID: t.ID, State: t.Status.State, Task: t})
	}
	for got.Load() < int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	pushRate := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()

	got.Store(0)
	body := []byte(`{"task":{"id":"tsk_000000","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: PerReceiver}}
	next := make(chan int, b.N)
	for i := range b.N {
		next <- i
	}
	close(next)
	start = time.Now()
	var wg sync.WaitGroup
	for range PerReceiver {
		wg.Go(func() {
			for range next {
				resp, err := hc.Post(srv.URL, "application/json", bytes.NewReader(body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	bareRate := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(pushRate, "deliveries/s")
	b.ReportMetric(bareRate, "bare-posts/s")
	b.ReportMetric(pushRate/bareRate, "ratio-vs-bare")
}
