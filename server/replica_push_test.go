package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/postgres"
)

// Push notifications of a member on replicas (DESIGN §16): a config made at one replica for a task
// another runs is read and listed at any replica, and its webhook gets every status of the task, in
// order, once each, the end last, whichever replica runs the task or delivers; a task whose replica
// died is ended by another, and the webhook is told.
func TestReplicaPushFromAnyReplica(t *testing.T) {
	rs := startReplicaFiles(t, 2, time.Second, map[string]string{"murmur.yaml": gatedScript + "push:\n  allow: [127.0.0.1]\n"})
	for i, f := range rs.fs {
		resp, err := http.Get(f.Members[0].URL + "/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		var card struct {
			Capabilities struct {
				PushNotifications bool `json:"pushNotifications"`
			} `json:"capabilities"`
		}
		err = json.NewDecoder(resp.Body).Decode(&card)
		resp.Body.Close()
		if err != nil || !card.Capabilities.PushNotifications {
			t.Errorf("replica r%d's card does not declare push notifications (%v)", i+1, err)
		}
	}
	hook := newWebhook(t, 1) // its first post fails: the change is posted again
	ctx := context.Background()
	task := sendTask(t, rs.clients[0], "pushed", true)
	waitState(t, rs.clients[0], task.ID, a2ago.TaskStateWorking)
	owner := rs.owners()[task.ID]
	other := rs.clients[1]
	if owner == "r2" {
		other = rs.clients[0]
	}
	cfg, err := other.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task.ID, URL: hook.srv.URL + "/hook", Token: "tok"})
	if err != nil {
		t.Fatalf("CreateTaskPushNotificationConfig at the replica that does not run the task: %v", err)
	}
	for i, c := range rs.clients {
		got, err := c.GetTaskPushConfig(ctx, &a2ago.GetTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID})
		if err != nil || got.URL != cfg.URL || got.Token != "tok" {
			t.Errorf("GetTaskPushNotificationConfig at r%d: %+v, %v", i+1, got, err)
		}
		if list, err := c.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 {
			t.Errorf("ListTaskPushNotificationConfigs at r%d: %+v, %v", i+1, list, err)
		}
	}
	if got := <-hook.got; got.Status.State != a2a.TaskStateWorking {
		t.Errorf("the webhook's first status is %s, want the task's status when the config was made (working)", got.Status.State)
	}
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	select {
	case got := <-hook.got:
		if got.Status.State != a2a.TaskStateCompleted || len(got.History) != 0 {
			t.Errorf("the webhook then got %s with %d history messages, want the completed task without its history", got.Status.State, len(got.History))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not told of the task's end within 30s")
	}

	// A task of a replica that dies: another replica ends it (the lease lapses), and the webhook is told.
	ghost, err := postgres.Open(ctx, rs.dsn, postgres.Config{Replica: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	running := &a2a.Task{ID: "tsk_pushghost", ContextID: "ctx_pg", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []a2a.Message{{MessageID: "msg_pg", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("was running")}}}}
	if err := ghost.Create(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, err := ghost.Renew(ctx, 2*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.clients[1].CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: "tsk_pushghost", URL: hook.srv.URL + "/ghost"}); err != nil {
		t.Fatal(err)
	}
	ghost.Close() // it renews no more, as a process that died
	var states []a2a.TaskState
	for len(states) == 0 || !states[len(states)-1].Terminal() {
		select {
		case got := <-hook.got:
			if got.ID != "tsk_pushghost" {
				t.Errorf("a post of task %s, want only tsk_pushghost's now", got.ID)
				continue
			}
			states = append(states, got.Status.State)
			if got.Status.State == a2a.TaskStateFailed && statusTextOf(got) != store.RestartMessage {
				t.Errorf("the dead replica's task was posted failed with %q, want the restart message", statusTextOf(got))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the webhook got %v within 30s, want working then failed", states)
		}
	}
	if len(states) != 2 || states[0] != a2a.TaskStateWorking || states[1] != a2a.TaskStateFailed {
		t.Errorf("the webhook got %v, want working then failed", states)
	}
}

// statusTextOf is the text of a task's status message.
func statusTextOf(t a2a.Task) string {
	if m := t.Status.Message; m != nil && len(m.Parts) > 0 && m.Parts[0].Text != nil {
		return *m.Parts[0].Text
	}
	return ""
}
