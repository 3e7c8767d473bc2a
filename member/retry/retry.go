// Package retry makes a SendMessage safe to retry (DESIGN §16): a message whose messageId its caller
// already sent is answered with the task that message created, as that task stands, rather than a
// second task. A Book finds that task, first among the tasks still being stored (Hold), then in the task
// store (its Lookup); a message that reuses the id of another message of the same caller is refused.
//
// Concurrency: a Book is safe for concurrent use; its lock is its own, never the session's, so a retry is
// found before admission, which never waits for the session. Imports: a2a and member/store only.
package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Key is a message as a retry names it: the member that sent it ("" for the operator) and its messageId.
type Key struct{ Caller, Message string }

// KeyOf is the key of the message that creates t: its caller and its first message's id.
func KeyOf(t *a2a.Task) Key { return Key{store.TaskCaller(t), store.FirstMessageID(t)} }

// Book finds the task an earlier copy of a message created.
type Book struct {
	// Lookup finds a stored task by the message that created it (store.Tasks.GetByMessage).
	Lookup func(ctx context.Context, caller, messageID string) (*a2a.Task, error)

	mu      sync.Mutex
	storing map[Key]*a2a.Task // the tasks being stored, by the message that created them
}

// Find returns the task an earlier copy of msg created, msg being about to create t: one being stored,
// else one in the store that was not rejected. ok is false when there is none (and for a message without
// an id). A message reusing the id of another message of the caller's (other parts, another context) is
// an error wrapping a2a.ErrInvalidParams: a retry sends the same message.
func (b *Book) Find(ctx context.Context, t *a2a.Task, msg *a2a.Message) (_ *a2a.Task, ok bool, err error) {
	key := KeyOf(t)
	if key.Message == "" {
		return nil, false, nil
	}
	b.mu.Lock()
	t, ok = b.storing[key]
	b.mu.Unlock()
	if !ok {
		t, err = b.Lookup(ctx, key.Caller, key.Message)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
	}
	if err := reused(key, t, msg); err != nil {
		return nil, false, err
	}
	return t, true, nil
}

// Hold records t, just admitted for msg and not yet stored, so that a copy of msg arriving meanwhile is
// answered with it. When a copy is being stored already, Hold records nothing and returns that task (or
// Find's error for another message under the id); release is then nil. Otherwise release, called once t's
// store write has returned, forgets it (the store answers from then on).
func (b *Book) Hold(t *a2a.Task, msg *a2a.Message) (held *a2a.Task, release func(), err error) {
	key := KeyOf(t)
	if key.Message == "" {
		return nil, func() {}, nil
	}
	b.mu.Lock()
	held, ok := b.storing[key]
	if !ok {
		if b.storing == nil {
			b.storing = map[Key]*a2a.Task{}
		}
		snap := *t
		b.storing[key] = &snap
	}
	b.mu.Unlock()
	if ok {
		if err := reused(key, held, msg); err != nil {
			return nil, nil, err
		}
		return held, nil, nil
	}
	return nil, func() {
		b.mu.Lock()
		delete(b.storing, key)
		b.mu.Unlock()
	}, nil
}

// reused refuses msg when the task its id already names was created by another message.
func reused(key Key, t *a2a.Task, msg *a2a.Message) error {
	if len(t.History) == 0 || same(t.History[0], msg) {
		return nil
	}
	return a2a.InvalidParams(a2a.FieldViolation{Field: "message.messageId", Description: fmt.Sprintf(
		"%s already names another message of yours (task %s), with other parts or another context; a retry sends the same message, and a new message needs an id of its own",
		key.Message, t.ID)})
}

// same reports whether retry is first sent again: the same role and parts, and no other context.
func same(first a2a.Message, retry *a2a.Message) bool {
	if first.Role != retry.Role || (retry.ContextID != "" && retry.ContextID != first.ContextID) {
		return false
	}
	a, errA := json.Marshal(first.Parts)
	b, errB := json.Marshal(retry.Parts)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}
