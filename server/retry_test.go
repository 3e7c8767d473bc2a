package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/internal/peercred"
)

// A SendMessage whose messageId the same caller already sent is answered with the task it created, as
// it stands, and runs nothing again (DESIGN §16, safe retries): at once from several goroutines while
// the first copy works, and blocking once it has ended (from the store, which keeps the message id:
// storetest's GetByMessage). Another caller's message of the same id is its own task; another message of
// the same caller under a used id is refused.
func TestRetriedSendMessageReturnsItsTask(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	ctx := context.Background()
	op := f.client(testOperatorToken)
	send := func(c interface {
		SendMessage(context.Context, *a2ago.SendMessageRequest) (a2ago.SendMessageResult, error)
	}, id string, immediately bool) *a2ago.Task {
		t.Helper()
		msg := userMessage("do it once")
		msg.ID = id
		res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg, Config: &a2ago.SendMessageConfig{ReturnImmediately: immediately}})
		if err != nil {
			t.Fatalf("SendMessage %s: %v", id, err)
		}
		return res.(*a2ago.Task)
	}
	first := send(op, "msg-retried-1", true)
	// Retried while the first copy still works, from several goroutines at once.
	var wg sync.WaitGroup
	got := make([]a2ago.TaskID, 8)
	for i := range got {
		wg.Go(func() { got[i] = send(op, "msg-retried-1", true).ID })
	}
	wg.Wait()
	for i, id := range got {
		if id != first.ID {
			t.Errorf("retry %d answered task %s, want the first copy's %s", i, id, first.ID)
		}
	}
	f.release()
	// A blocking retry waits for the task, as the first copy would have.
	done := send(op, "msg-retried-1", false)
	if done.ID != first.ID || done.Status.State != a2ago.TaskStateCompleted {
		t.Errorf("blocking retry: task %s %s, want %s completed", done.ID, done.Status.State, first.ID)
	}
	// Another caller's message of the same id is a task of its own.
	peer := send(f.client(peerToken("caller", peercred.Trusted)), "msg-retried-1", false)
	if peer.ID == first.ID {
		t.Error("a peer's message with the operator's message id was answered with the operator's task")
	}
	// The same id on another message of the same caller (other parts, or another context) is refused,
	// naming the task it already names; nothing is created.
	for name, edit := range map[string]func(*a2ago.Message){
		"other parts":     func(m *a2ago.Message) { m.Parts = a2ago.ContentParts{a2ago.NewTextPart("something else")} },
		"another context": func(m *a2ago.Message) { m.ContextID = "ctx_another" },
	} {
		msg := userMessage("do it once")
		msg.ID = "msg-retried-1"
		edit(msg)
		_, err := op.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg})
		if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), string(first.ID)) {
			t.Errorf("%s under a used messageId: %v, want invalid params naming %s", name, err, first.ID)
		}
	}
	list, err := op.ListTasks(ctx, &a2ago.ListTasksRequest{})
	if err != nil || list.TotalSize != 2 {
		t.Errorf("ListTasks: %v, %d tasks; want 2 (one per caller)", err, list.TotalSize)
	}
}
