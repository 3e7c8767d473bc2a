package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// BenchmarkListTasks reads the first page (10 tasks) of ListTasks with a status filter through the door,
// with 1,000 tasks in the store and then with 100,000, and reports both times and their ratio (the goal:
// at most 2; it never fails for slowness):
//
//	go test -run '^$' -bench ListTasks -benchtime 2000x ./server/
func BenchmarkListTasks(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": benchAgent + "store:\n  retention: {max_tasks: 200000}\n"})
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"TASK_STATE_COMPLETED","pageSize":10}}`)
	measure := func() time.Duration {
		start := time.Now()
		for range b.N {
			answer, err := post(hc, f.url+"/a2a", body)
			if err != nil {
				b.Fatal(err)
			}
			if len(answer) < 100 {
				b.Fatalf("ListTasks answered %s", answer)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	fill(b, f, 0, 1_000)
	b.ResetTimer()
	small := measure()
	b.StopTimer()
	fill(b, f, 1_000, 100_000)
	b.StartTimer()
	large := measure()
	b.StopTimer()
	b.ReportMetric(float64(small.Microseconds()), "µs/list-at-1k")
	b.ReportMetric(float64(large.Microseconds()), "µs/list-at-100k")
	b.ReportMetric(float64(large)/float64(small), "100k/1k")
	b.ReportMetric(0, "ns/op")
}

// fill stores completed tasks numbered from..to-1 straight into the member's store, 64 writers at a time.
func fill(b *testing.B, f *fixture, from, to int) {
	b.Helper()
	next := make(chan int, to-from)
	for n := from; n < to; n++ {
		next <- n
	}
	close(next)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for n := range next {
				id := a2a.TaskID(fmt.Sprintf("tsk_fill_%06d", n))
				t := &a2a.Task{ID: id, ContextID: "ctx_fill",
					Status:  a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: a2a.NewTimestamp(time.Now())},
					History: []a2a.Message{{MessageID: "m", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("fill")}, TaskID: id}}}
				if err := f.store.Create(context.Background(), t); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
