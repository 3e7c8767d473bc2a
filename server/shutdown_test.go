package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/roster"
)

// TestShutdownTellsTheWatchersOfQueuedTasks: the queued tasks a shutdown ends (in one statement, without
// decoding them) still reach whoever watches them: a task's stream ends with its canceled status, a
// task's push config gets the canceled task (from the outbox, once the member is back), and a task no
// one watches is canceled in the store all the same.
func TestShutdownTellsTheWatchersOfQueuedTasks(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "worker"), 0o755)
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n"), 0o644)
	os.WriteFile(filepath.Join(root, "worker", "murmur.yaml"), []byte(strings.Replace(pushWorker, "\n", "\ntask_acceptance: queue\nqueue_size: 10\n", 1)), 0o644)
	start := func() *Formation {
		r, err := roster.Load(filepath.Join(root, "roster.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
			Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test", PushBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := start()
	hook := newWebhook(t, 0)
	c := a2agoClient(t, f.Members[0].URL, "op")
	ctx := context.Background()
	send := func(text string) a2ago.TaskID {
		t.Helper()
		res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage(text), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2ago.Task).ID
	}
	running := send("running")
	waitFor(t, func() bool {
		task, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: running})
		return err == nil && task.Status.State == a2ago.TaskStateWorking
	})
	pushed, streamed, alone := send("pushed"), send("streamed"), send("alone")
	if _, err := c.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: pushed, URL: hook.srv.URL}); err != nil {
		t.Fatal(err)
	}
	stream := collect(a2agoClient(t, f.Members[0].URL, "op").SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: streamed}))
	stream.until(t, "task "+string(a2ago.TaskStateSubmitted))
	hook.until(t, a2a.TaskStateSubmitted)

	shutdown(t, f)
	lines, err := stream.rest(t)
	if err != nil || len(lines) == 0 || lines[len(lines)-1] != "status "+string(a2ago.TaskStateCanceled)+" "+member.ShutdownCancel {
		t.Errorf("the queued task's stream ended (%v) with %q, want its canceled status", err, lines)
	}

	f = start()
	defer shutdown(t, f)
	if seen := hook.until(t, a2a.TaskStateCanceled); len(seen) != 1 {
		t.Errorf("the pushed task's webhook got %v after the restart, want its canceled state", seen)
	}
	c = a2agoClient(t, f.Members[0].URL, "op")
	for _, id := range []a2ago.TaskID{pushed, streamed, alone} {
		task, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
		if err != nil || task.Status.State != a2ago.TaskStateCanceled || task.Status.Message == nil ||
			task.Status.Message.Parts[0].Text() != member.ShutdownCancel {
			t.Errorf("queued task %s after the shutdown: %+v %v", id, task, err)
		}
	}
}
