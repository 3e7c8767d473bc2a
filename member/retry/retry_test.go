package retry

import (
	"context"
	"errors"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/store"
)

func message(text string) *a2a.Message {
	return &a2a.Message{MessageID: "msg_1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}
}

// taskOf is the task msg creates for the peer caller ("" for the operator's).
func taskOf(id a2a.TaskID, caller string, msg *a2a.Message) *a2a.Task {
	first := *msg
	first.TaskID, first.ContextID = id, "ctx_1"
	t := &a2a.Task{ID: id, ContextID: "ctx_1", History: []a2a.Message{first}}
	if caller != "" {
		t.Metadata = map[string]any{ids.Meta: map[string]any{string(ids.MetaCaller): caller}}
	}
	return t
}

// Find answers a copy of a message with the task being stored for it, else the stored one, and refuses
// another message under the same id; a message without an id, or one nobody sent, is no retry. Hold gives
// way to a copy being stored, and release makes the store answer again.
func TestFindAndHold(t *testing.T) {
	ctx := context.Background()
	stored := map[Key]*a2a.Task{}
	lookups := 0
	b := &Book{Lookup: func(_ context.Context, caller, id string) (*a2a.Task, error) {
		lookups++
		if t, ok := stored[Key{caller, id}]; ok {
			return t, nil
		}
		return nil, store.ErrNotFound
	}}
	key := Key{Caller: "caller", Message: "msg_1"}
	msg := message("do it once")
	if _, ok, err := b.Find(ctx, taskOf("tsk_0", "caller", msg), msg); ok || err != nil {
		t.Fatalf("Find of a message nobody sent: %v, %v", ok, err)
	}
	noID := message("no id")
	noID.MessageID = ""
	if _, ok, err := b.Find(ctx, taskOf("tsk_0", "caller", noID), noID); ok || err != nil || lookups != 1 {
		t.Fatalf("Find of a message without an id: %v, %v, %d lookups (want none for it)", ok, err, lookups)
	}

	first := taskOf("tsk_1", "caller", msg)
	held, release, err := b.Hold(first, msg)
	if held != nil || release == nil || err != nil {
		t.Fatalf("Hold of a first copy: %v, %v", held, err)
	}
	if got, ok, err := b.Find(ctx, taskOf("tsk_2", "caller", msg), message("do it once")); !ok || err != nil || got.ID != "tsk_1" || lookups != 1 {
		t.Errorf("Find while it is stored: %v %v %v, %d lookups (want the held task, no lookup)", got, ok, err, lookups)
	}
	if got, rel, err := b.Hold(taskOf("tsk_2", "caller", msg), msg); got == nil || got.ID != "tsk_1" || rel != nil || err != nil {
		t.Errorf("Hold of a second copy: %v, %v; want the first copy's task", got, err)
	}
	if _, rel, err := b.Hold(taskOf("tsk_3", "caller", msg), message("something else")); rel != nil || !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("Hold of another message under the id: %v, want invalid params", err)
	}
	release()
	stored[key] = first
	if got, ok, err := b.Find(ctx, taskOf("tsk_4", "caller", msg), msg); !ok || err != nil || got.ID != "tsk_1" || lookups != 2 {
		t.Errorf("Find once stored: %v %v %v, %d lookups", got, ok, err, lookups)
	}
	for name, m := range map[string]*a2a.Message{
		"other parts":     message("something else"),
		"another context": func() *a2a.Message { m := message("do it once"); m.ContextID = "ctx_2"; return m }(),
		"another role":    func() *a2a.Message { m := message("do it once"); m.Role = a2a.RoleAgent; return m }(),
	} {
		if _, ok, err := b.Find(ctx, taskOf("tsk_5", "caller", m), m); ok || !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("%s under a used id: %v, %v; want invalid params", name, ok, err)
		}
	}
	if _, ok, err := b.Find(ctx, taskOf("tsk_6", "other", msg), msg); ok || err != nil {
		t.Errorf("another caller's message of the id: %v, %v; want none", ok, err)
	}
}
