package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/roster"
)

func TestFormationShutdownAnswersBlockedCallsCanceled(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"slow/murmur.yaml": gatedScript,
		"echo/murmur.yaml": echoAgent,
		"roster.yaml":      "formation: f\nmembers:\n  - {name: slow, capsule: ./slow, listen: '127.0.0.1:0'}\n  - {name: echo, capsule: ./echo, listen: '127.0.0.1:0'}\nreach:\n  - {from: echo, to: [slow]}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	t.Cleanup(func() { os.WriteFile(filepath.Join(root, "slow", "go"), nil, 0o644) })
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := Tokens{Operator: "op", Formation: "fm"}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: tokens, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Members) != 2 || f.Members[0].Name != "slow" || f.Members[0].URL == f.Members[1].URL {
		t.Fatalf("members %+v", f.Members)
	}
	ctx := context.Background()
	echo := a2a.NewClient(f.Members[1].URL+"/a2a", "op", nil)
	res, err := echo.SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hi")}}})
	if err != nil || res.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("echo member: %+v %v", res, err)
	}

	slow := a2a.NewClient(f.Members[0].URL+"/a2a", "op", nil)
	blocked := make(chan *a2a.Task, 1)
	go func() {
		res, err := slow.SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("long")}}})
		if err != nil {
			t.Errorf("blocking SendMessage during shutdown: %v", err)
			blocked <- nil
			return
		}
		blocked <- res.Task
	}()
	for {
		page, err := slow.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateWorking})
		if err != nil {
			t.Fatal(err)
		}
		if page.TotalSize == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := f.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	task := <-blocked
	if task == nil {
		return
	}
	if task.Status.State != a2a.TaskStateCanceled || task.Status.Message.Text() != member.ShutdownCancel {
		t.Errorf("the blocked caller got %s %+v, want canceled with %q", task.Status.State, task.Status.Message, member.ShutdownCancel)
	}
}
