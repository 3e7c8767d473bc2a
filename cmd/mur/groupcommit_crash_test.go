package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// groupCapsule answers at once (the script driver echoes) and queues whatever comes while it works.
const groupCapsule = `name: solo
inference:
  driver: local
  choices:
    local: {driver: script}
task_acceptance: queue
queue_size: 100000
`

// The member is killed (SIGKILL) while 16 clients keep it writing: acknowledgements of queued tasks and
// ends of finished ones share group commits then. After the restart, every task a client got an
// acknowledgement for is there: one acknowledged completed is completed with the same answer, one
// acknowledged queued has either completed or failed with the restart message.
func TestAcknowledgedTasksSurviveSIGKILLDuringGroupCommits(t *testing.T) {
	rosterPath, _, dataDir := soloFormation(t, "group", groupCapsule)
	ctx := context.Background()

	first := startMember(t, rosterPath, dataDir)
	const clients, killAfter = 16, 400
	var mu sync.Mutex
	acked := map[a2a.TaskID]*a2a.Task{}
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			cl := a2a.NewClient(first.url+"/a2a", "op", nil)
			for i := 0; ; i++ {
				select {
				case <-killed:
					return
				default:
				}
				text := fmt.Sprintf("client %d task %d", c, i)
				res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{
					Message:       &a2a.Message{MessageID: a2a.MessageID(fmt.Sprintf("m-%d-%d", c, i)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
					Configuration: &a2a.SendMessageConfig{ReturnImmediately: i%2 == 0},
				})
				if err != nil {
					select {
					case <-killed: // the member is gone: an unanswered request promised nothing
						return
					default:
						t.Errorf("SendMessage before the kill: %v", err)
						return
					}
				}
				mu.Lock()
				acked[res.Task.ID] = res.Task
				n := len(acked)
				mu.Unlock()
				if n == killAfter {
					once.Do(func() {
						first.cmd.Process.Signal(syscall.SIGKILL)
						close(killed)
					})
				}
			}
		})
	}
	wg.Wait()
	first.cmd.Wait()
	if t.Failed() {
		return
	}

	second := startMember(t, rosterPath, dataDir)
	c2 := a2a.NewClient(second.url+"/a2a", "op", nil)
	states := map[a2a.TaskState]int{}
	for id, ack := range acked {
		got, err := c2.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Errorf("task %s, acknowledged %s, lost in the crash: %v", id, ack.Status.State, err)
			continue
		}
		states[got.Status.State]++
		switch ack.Status.State {
		case a2a.TaskStateCompleted:
			a, _ := got.Artifact("response")
			wa, _ := ack.Artifact("response")
			if got.Status.State != a2a.TaskStateCompleted || a.Text() != wa.Text() {
				t.Errorf("task %s, acknowledged completed with %q, came back %s with %q", id, wa.Text(), got.Status.State, a.Text())
			}
		case a2a.TaskStateSubmitted:
			restarted := got.Status.State == a2a.TaskStateFailed && got.Status.Message != nil && got.Status.Message.Text() == store.RestartMessage
			if got.Status.State != a2a.TaskStateCompleted && !restarted {
				t.Errorf("task %s, acknowledged queued, came back %s %+v, want completed or failed with %q", id, got.Status.State, got.Status.Message, store.RestartMessage)
			}
		default:
			t.Errorf("task %s was acknowledged %s, want submitted or completed", id, ack.Status.State)
		}
	}
	t.Logf("%d acknowledged tasks after the restart: %v", len(acked), states)
}
