package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/roster"
)

// hangingWebhook is a push receiver on loopback that never answers: it holds each post open until the
// notifier gives up on it or the test ends.
type hangingWebhook struct {
	srv   *httptest.Server
	posts atomic.Int64
}

func newHangingWebhook(t testing.TB) *hangingWebhook {
	h := &hangingWebhook{}
	release := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.posts.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		h.srv.Close()
	})
	return h
}

// fairWorker answers each task at once; its webhooks may be on 127.0.0.1.
const fairWorker = "name: worker\npush: {allow: [127.0.0.1]}\nscript:\n  command: [sh, -c, 'read -r l; echo \"done: $l\"']\n"

// hangingFormation starts a formation of a worker and a peer, caller, that may reach it; caller makes
// hanging push configs for tasks of its own, all to one webhook that never answers, and the test waits
// until the worker posts to it. It returns the formation and an operator client of the worker.
func hangingFormation(t testing.TB, hanging int) (*Formation, *a2aclient.Client) {
	t.Helper()
	root := t.TempDir()
	for p, body := range map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
			"  - {name: caller, capsule: ./caller, listen: '127.0.0.1:0'}\nreach:\n  - {from: caller, to: [worker]}\n",
		"worker/murmur.yaml": fairWorker,
		"caller/murmur.yaml": "name: caller\nscript: {command: [cat]}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
		Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test", PushBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	hang := newHangingWebhook(t)
	peer := a2agoClient(t, f.Members[0].URL, peercred.NewKey("fm", "f").Credential("caller", peercred.Trusted))
	ctx := context.Background()
	for made := 0; made < hanging; {
		task := finishedTask(t, peer, fmt.Sprint("peer job ", made))
		for j := 0; j < 10 && made < hanging; j, made = j+1, made+1 {
			if _, err := peer.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task, URL: fmt.Sprintf("%s/hook/%d", hang.srv.URL, made)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hanging > 0 {
		waitForTB(t, func() bool { return hang.posts.Load() >= int64(min(hanging, 4)) }) // the peer's posts hang
	}
	return f, a2agoClient(t, f.Members[0].URL, "op")
}

// finishedTask sends text and returns the id of the task once it has completed.
func finishedTask(t testing.TB, c *a2aclient.Client, text string) a2ago.TaskID {
	t.Helper()
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage(text), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2ago.Task).ID
	waitForTB(t, func() bool {
		task, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
		return err == nil && task.Status.State == a2ago.TaskStateCompleted
	})
	return id
}

func waitForTB(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
	}
}

// firstDelivery makes a config of the operator's for a finished task of its own, to hook, and returns
// how long the webhook waited for its first delivery (at most limit).
func firstDelivery(t testing.TB, op *a2aclient.Client, hook *webhook, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	task := finishedTask(t, op, "operator's job")
	start := time.Now()
	if _, err := op.CreateTaskPushConfig(context.Background(), &a2ago.PushConfig{TaskID: task, URL: hook.srv.URL + "/operator"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hook.got:
		return time.Since(start), true
	case <-time.After(limit):
		return limit, false
	}
}

// TestPushHangingWebhooksOfOnePeerDelayNoOneElse: a peer makes 40 push configs for its tasks, all to a
// webhook that holds every post open; the operator's webhook, made after them, still gets its first
// delivery within 3 s (well under the 10 s a hanging post is given: the peer's posts cannot all have
// ended before it). Before delivery was fair per caller, the 40 hanging posts held every slot and the
// operator's first delivery waited more than 100 s.
func TestPushHangingWebhooksOfOnePeerDelayNoOneElse(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	_, op := hangingFormation(t, 40)
	hook := newWebhook(t, 0)
	if took, ok := firstDelivery(t, op, hook, 3*time.Second); !ok {
		t.Fatalf("the operator's webhook got nothing within %s behind 40 hanging webhooks of a peer", took)
	}
}

// BenchmarkPushFirstDeliveryBehindHangingWebhooks measures how long the operator's new webhook waits
// for its first delivery while a peer has 0, 8 or 40 webhooks that never answer (each post is given up
// after 10 s, tried 8 times):
//
//	go test -run '^$' -bench PushFirstDeliveryBehindHangingWebhooks -benchtime 3x ./server/
func BenchmarkPushFirstDeliveryBehindHangingWebhooks(b *testing.B) {
	for _, hanging := range []int{0, 8, 40} {
		b.Run(fmt.Sprint("hanging=", hanging), func(b *testing.B) {
			_, op := hangingFormation(b, hanging)
			hook := newWebhook(b, 0)
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				took, ok := firstDelivery(b, op, hook, 20*time.Minute)
				if !ok {
					b.Fatalf("no first delivery within %s", took)
				}
				total += took
			}
			b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "ms/first-delivery")
		})
	}
}
