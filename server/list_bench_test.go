package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// BenchmarkListTasks reads the first page (10 tasks) of ListTasks through the door, with 1,000 tasks in
// the store and then with 100,000, and reports the times and their ratio (the goal: at most 2; it never
// fails for slowness) for three filters: a status (every task matches), a contextId and a
// statusTimestampAfter that 20 recent tasks match:
//
//	go test -run '^$' -bench ListTasks -benchtime 2000x ./server/
func BenchmarkListTasks(b *testing.B) {
	f := startDoor(b, map[string]string{"murmur.yaml": benchAgent + "store:\n  retention: {max_tasks: 200000}\n"})
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	list := func(params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{` + params + `,"pageSize":10}}`)
	}
	measure := func(body []byte) time.Duration {
		start := time.Now()
		for range b.N {
			answer, err := post(hc, f.url+"/a2a", body)
			if err != nil {
				b.Fatal(err)
			}
			if len(answer) < 100 || !bytes.Contains(answer, []byte(`"totalSize":`)) {
				b.Fatalf("ListTasks answered %s", answer)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	// recent stores 20 tasks in a context of their own after the others, and returns the filters that
	// find them.
	recent := func(round string) [][]byte {
		after := time.Now().Add(-time.Millisecond)
		time.Sleep(2 * time.Millisecond)
		ctxID := "ctx_recent_" + round
		for n := range 20 {
			storeCompleted(b, f, a2a.TaskID(fmt.Sprintf("tsk_recent_%s_%02d", round, n)), ctxID)
		}
		return [][]byte{list(`"contextId":"` + ctxID + `"`),
			list(`"statusTimestampAfter":"` + after.UTC().Format(time.RFC3339Nano) + `"`)}
	}
	status := list(`"status":"TASK_STATE_COMPLETED"`)
	var small, large [3]time.Duration
	fill(b, f, 0, 1_000)
	filters := append([][]byte{status}, recent("1k")...)
	b.ResetTimer()
	for i, body := range filters {
		small[i] = measure(body)
	}
	b.StopTimer()
	fill(b, f, 1_000, 100_000)
	filters = append([][]byte{status}, recent("100k")...)
	b.StartTimer()
	for i, body := range filters {
		large[i] = measure(body)
	}
	b.StopTimer()
	for i, name := range []string{"", "context-", "after-"} {
		b.ReportMetric(float64(small[i].Microseconds()), "µs/"+name+"list-at-1k")
		b.ReportMetric(float64(large[i].Microseconds()), "µs/"+name+"list-at-100k")
		b.ReportMetric(float64(large[i])/float64(small[i]), name+"100k/1k")
	}
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
				if !storeCompleted(b, f, a2a.TaskID(fmt.Sprintf("tsk_fill_%06d", n)), "ctx_fill") {
					return
				}
			}
		})
	}
	wg.Wait()
}

// storeCompleted stores a completed task straight into the member's store; it reports false when it could not.
func storeCompleted(b *testing.B, f *fixture, id a2a.TaskID, contextID string) bool {
	t := &a2a.Task{ID: id, ContextID: contextID,
		Status:  a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: a2a.NewTimestamp(time.Now())},
		History: []a2a.Message{{MessageID: "m", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("fill")}, TaskID: id}}}
	if err := f.store.Create(context.Background(), t); err != nil {
		b.Error(err)
		return false
	}
	return true
}
