package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// TestPushDeliveredAfterSIGKILL: a task ends while its webhook is down, and the member is killed before
// it could deliver the end. The member started again delivers it.
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
		Message:       &a2a.Message{MessageID: "m", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("quick one")}},
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
	select {
	case task := <-got:
		if task.ID != res.Task.ID || task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("after the restart the webhook got %s %s, want %s completed", task.ID, task.Status.State, res.Task.ID)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the task's end was never delivered after the restart")
	}
}
