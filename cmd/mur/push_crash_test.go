package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// TestPushDeliveredAfterSIGKILL: a task works and ends while its webhook is down, and the member is
// killed before it could deliver those changes. The member started again on the same store delivers
// each of them, in order.
func TestPushDeliveredAfterSIGKILL(t *testing.T) {
	var up atomic.Bool
	got := make(chan a2a.Task, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var sr a2a.StreamResponse
		json.Unmarshal(body, &sr)
		if sr.Task != nil {
			got <- *sr.Task
		}
	}))
	defer hook.Close()

	root := t.TempDir()
	capsule := filepath.Join(root, "solo")
	os.MkdirAll(capsule, 0o755)
	os.WriteFile(filepath.Join(capsule, "murmur.yaml"), []byte(crashCapsule+"push: {allow: [127.0.0.1]}\n"), 0o644)
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: crash\nmembers:\n  - name: solo\n    capsule: ./solo\n"), 0o644)
	dataDir := filepath.Join(root, "data")
	ctx := context.Background()

	first := startMember(t, rosterPath, dataDir)
	res, err := a2a.NewClient(first.url+"/a2a", "op", nil).SendMessage(ctx, &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("quick one")}},
		Configuration: &a2a.SendMessageConfig{PushConfig: &a2a.TaskPushNotificationConfig{URL: hook.URL + "/hook", Token: "t"}},
	})
	if err != nil || res.Task == nil || res.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the task: %+v %v", res, err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	select {
	case task := <-got:
		t.Fatalf("a delivery reached the webhook while it was down: %s", task.Status.State)
	default:
	}

	up.Store(true)
	startMember(t, rosterPath, dataDir)
	rank := map[a2a.TaskState]int{a2a.TaskStateSubmitted: 1, a2a.TaskStateWorking: 2, a2a.TaskStateCompleted: 3}
	var states []a2a.TaskState
	for len(states) == 0 || states[len(states)-1] != a2a.TaskStateCompleted {
		select {
		case task := <-got:
			if task.ID != res.Task.ID {
				t.Fatalf("after the restart the webhook got task %s, want %s", task.ID, res.Task.ID)
			}
			if len(states) > 0 && rank[task.Status.State] <= rank[states[len(states)-1]] {
				t.Fatalf("after the restart the webhook got %v then %s: each change once, in order", states, task.Status.State)
			}
			states = append(states, task.Status.State)
		case <-time.After(60 * time.Second):
			t.Fatalf("after the restart the webhook got %v and never the task's end", states)
		}
	}
	if !slices.Contains(states, a2a.TaskStateWorking) {
		t.Errorf("after the restart the webhook got %v: the WORKING change is missing", states)
	}
}
