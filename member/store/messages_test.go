package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/murmur-run/murmur/a2a"
)

// messageTask is a submitted task of the operator's, created by message msg.
func messageTask(n int, msg string) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("tsk_%04d", n)), ContextID: "ctx",
		Status:  a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History: []a2a.Message{{MessageID: a2a.MessageID(msg), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hi")}}}}
}

// lookup is GetByMessage's answer as the id found, "" for none.
func lookup(t *testing.T, s *Store, msg string) a2a.TaskID {
	t.Helper()
	got, err := s.GetByMessage(context.Background(), "", msg)
	if errors.Is(err, ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("GetByMessage(%q): %v", msg, err)
	}
	return got.ID
}

// The message filter: a message no task came from is answered without a query on a new store; a file
// opened again reads its messages in at the first lookup, so a retry after a restart still finds its
// task; past the filter's bound every lookup queries, and still finds what it should.
func TestMessageFilter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, s, "msg_never"); got != "" {
		t.Errorf("a message no task came from found %s", got)
	}
	if n := s.read.Stats().OpenConnections; n != 0 {
		t.Errorf("a lookup of a message no task came from opened %d reader connection(s); want it answered by the filter", n)
	}
	ctx := context.Background()
	if err := s.Create(ctx, messageTask(1, "msg_one")); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, s, "msg_one"); got != "tsk_0001" {
		t.Errorf("GetByMessage(msg_one) = %q; want tsk_0001", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := lookup(t, s, "msg_one"); got != "tsk_0001" {
		t.Errorf("after a restart, GetByMessage(msg_one) = %q; want tsk_0001 (the file's messages read in)", got)
	}
	if got := lookup(t, s, "msg_never"); got != "" {
		t.Errorf("after a restart, a message no task came from found %s", got)
	}

	defer func(n int) { maxMessages = n }(maxMessages)
	maxMessages = 2
	for i, msg := range []string{"msg_two", "msg_three"} {
		if err := s.Create(ctx, messageTask(i+2, msg)); err != nil {
			t.Fatal(err)
		}
	}
	if !s.messages.off {
		t.Error("the filter holds more than its bound")
	}
	for want, msg := range map[a2a.TaskID]string{"tsk_0001": "msg_one", "tsk_0002": "msg_two", "tsk_0003": "msg_three", "": "msg_never"} {
		if got := lookup(t, s, msg); got != want {
			t.Errorf("past the bound, GetByMessage(%s) = %q; want %q", msg, got, want)
		}
	}
}
