package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The pacer answers a burst of refusals at once, then one per 1/rate, and holds none longer than its
// bound; on the bubble's clock, so no real time passes.
func TestRefusalPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var held atomic.Int32
		p := newRefusalPacer(4, func() { held.Add(1) })
		p.wait = time.Second
		start := time.Now()
		for range 4 {
			p.pace(context.Background())
		}
		if time.Since(start) != 0 || held.Load() != 0 {
			t.Fatalf("the burst of 4 waited %s, %d held", time.Since(start), held.Load())
		}
		p.pace(context.Background())
		if got := time.Since(start); got != 250*time.Millisecond || held.Load() != 1 {
			t.Errorf("the fifth refusal waited %s (%d held), want 250ms", got, held.Load())
		}
		// Far more at once than the rate allows: each waits at most the bound.
		for range 20 {
			go p.pace(context.Background())
		}
		synctest.Wait()
		before := time.Now()
		time.Sleep(time.Second)
		synctest.Wait()
		if held.Load() != 21 || time.Since(before) != time.Second {
			t.Errorf("%d refusals held, want 21, every one released within the bound", held.Load())
		}
		// A sender that goes away is not waited for.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		at := time.Now()
		p.pace(ctx)
		if time.Since(at) != 0 {
			t.Errorf("a canceled refusal waited %s", time.Since(at))
		}
	})
}

// The door paces its refusals: past its rate, requests without a valid token are held back and counted.
func TestDoorPacesRefusals(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	f.door.pacer = newRefusalPacer(1, f.door.metrics.paced.Inc)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a", strings.NewReader(validSend))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("HTTP %d, want 401", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if n := testutil.ToFloat64(f.door.metrics.paced); n != 2 {
		t.Errorf("mur_door_refusals_paced_total = %v, want 2: one refusal a second, three sent at once", n)
	}
}

// A busy member's rejections are paced the same way.
func TestDoorPacesRejections(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	f.door.pacer = newRefusalPacer(1, f.door.metrics.paced.Inc)
	c := f.client(testOperatorToken)
	held := sendTask(t, c, "hold the member", true)
	f.waitState(c, held.ID, a2ago.TaskStateWorking)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			res, err := c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("one too many"),
				Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
			if task, ok := res.(*a2ago.Task); err != nil || !ok || task.Status.State != a2ago.TaskStateRejected {
				t.Errorf("SendMessage to a busy member: %v %v, want a rejected task", res, err)
			}
		})
	}
	wg.Wait()
	if n := testutil.ToFloat64(f.door.metrics.paced); n != 2 {
		t.Errorf("mur_door_refusals_paced_total = %v, want 2", n)
	}
}
