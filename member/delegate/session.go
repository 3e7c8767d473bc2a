package delegate

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/usage"
)

// Session is a started sub-session as the session core hands it over: its id and callbacks into it.
// It is a Sub.
type Session struct {
	SessionID string
	// SendTask sends the sub-session's task a user message of text with trust.
	SendTask func(ctx context.Context, msg *a2a.Message, trust ids.Trust) (*a2a.Task, error)
	// WaitTask waits for a change of its task; CancelTask cancels it; CloseAll closes the sub-session
	// and what it holds.
	WaitTask   func(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	CancelTask func(ctx context.Context, id a2a.TaskID) error
	CloseAll   func(ctx context.Context) error
}

// Open opens the task store of spec's sub-session, delegations/<dlg id>/tasks.db under dir (the
// delegating session's records directory), and starts the sub-session on it through start. The store
// is closed with the sub-session, or at once when the sub-session does not start.
func Open(dir string, spec StartSpec, start func(*store.Store) (*Session, error)) (Sub, error) {
	st, err := store.Open(filepath.Join(dir, "delegations", spec.Delegation, "tasks.db"))
	if err != nil {
		return nil, err
	}
	u, err := start(st)
	if err != nil {
		_ = st.Close() // already failing: the error returned says what went wrong
		return nil, err
	}
	closeSub := u.CloseAll
	u.CloseAll = func(ctx context.Context) error {
		err := closeSub(ctx)
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return u, nil
}

// ID is the sub-session's ses_ id.
func (u *Session) ID() string { return u.SessionID }

// Send starts the sub-session's task; a rejected one is an error saying why.
func (u *Session) Send(ctx context.Context, text string, trust ids.Trust) (string, error) {
	t, err := u.SendTask(ctx, &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}}, trust)
	if err != nil {
		return "", err
	}
	if t.Status.State == a2a.TaskStateRejected {
		return "", fmt.Errorf("%s", t.Status.Message.Text())
	}
	return string(t.ID), nil
}

// Wait waits for a change of the task and says how it ended, if it did.
func (u *Session) Wait(ctx context.Context, task string) (Ending, error) {
	t, err := u.WaitTask(ctx, a2a.TaskID(task))
	if err != nil {
		return Ending{}, err
	}
	if !t.Status.State.Terminal() {
		return Ending{}, nil
	}
	e := Ending{Ended: true, Status: calls.StateWord(t.Status.State)}
	if t.Status.Message != nil {
		e.Message = t.Status.Message.Text()
	}
	if a, ok := t.Artifact("response"); ok {
		e.Answer = a.Text()
	}
	if u, ok := usage.Read(ids.Murmur(t.Metadata)); ok {
		e.Usage = &u
	}
	return e, nil
}

// Cancel cancels the task.
func (u *Session) Cancel(ctx context.Context, task string) error {
	return u.CancelTask(ctx, a2a.TaskID(task))
}

// Close closes the sub-session.
func (u *Session) Close(ctx context.Context) error { return u.CloseAll(ctx) }

// ResolveFor loads the sub-capsules the capabilities.spawn.allow of member's capsule c names, from the
// artifact stores of project (c's own directory when ""); none for a capsule that is not an agent.
func ResolveFor(c *capsule.Capsule, member, project string, getenv func(string) string) ([]Entry, error) {
	if !c.IsAgent() || len(c.Capabilities.Spawn.Allow) == 0 {
		return nil, nil
	}
	if project == "" {
		project = c.Dir
	}
	entries, err := Resolve(c, artifact.Stores(project, getenv, getenv("HOME")))
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", member, err)
	}
	return entries, nil
}
