package converse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/store"
)

// InputTimeout ends a task whose sender did not answer its question within lifecycle.input_wait_secs.
type InputTimeout struct{ Limit time.Duration }

func (e *InputTimeout) Error() string {
	return fmt.Sprintf("the task waited %d second(s) for its sender's input (lifecycle.input_wait_secs) and got none",
		int64(e.Limit/time.Second))
}

// Config is what the session hands this package for the conversation of its tasks: plain values and
// callbacks into the session core.
type Config struct {
	Member  string
	DoorURL string // where the door serves kept files; "" without a door
	// Get reads a task the sender of scope may see; List lists the member's tasks.
	Get  func(ctx context.Context, id a2a.TaskID, scope store.Scope) (*a2a.Task, error)
	List func(ctx context.Context, q store.ListQuery) (store.ListPage, error)
	// Caller is the member that sent a task; "" for the operator.
	Caller func(t *a2a.Task) string
	// Record writes one record of the session's trace.
	Record records.WriteFunc
	Waiter *Waiter
	// Forward, on a member's replicas, hands a follow-up to a task that waits at another replica to that
	// replica, and reports what became of it: taken, or refused with why (the message does not answer
	// the question), or neither when the task no longer waits at a live replica. nil: one process.
	Forward func(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (taken bool, refusal string, err error)
	// Workdir is where the session's commands run, out/artifacts/ in it; ArtifactsRoot keeps the files
	// too large to carry inline, by task, for the door to serve.
	Workdir, ArtifactsRoot string
	// Files, on a member's replicas (DESIGN §16), keeps those files in the store the replicas share, so
	// that the door of any replica serves them; nil for a member of one process.
	Files ArtifactKeeper
}

// FollowUp takes a message naming an existing task: the answer to a task that waits for its sender
// (TASK_STATE_INPUT_REQUIRED), which it resumes; any other state refuses it, saying what to do.
func (c Config) FollowUp(ctx context.Context, msg *a2a.Message, scope store.Scope) (*a2a.Task, error) {
	t, err := c.Get(ctx, msg.TaskID, scope)
	if err != nil {
		return nil, err
	}
	if msg.ContextID != "" && msg.ContextID != t.ContextID {
		return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "message.contextId", Description: fmt.Sprintf(
			"task %s belongs to context %s, not %s; leave contextId out of a follow-up or name the task's own", t.ID, t.ContextID, a2a.CutID(msg.ContextID))})
	}
	if t.Status.State == a2a.TaskStateInputRequired {
		err := c.Waiter.Deliver(ctx, t.ID, msg)
		switch {
		case err == nil:
			return c.Get(ctx, t.ID, scope)
		case errors.Is(err, ErrNotWaiting) && c.Forward != nil:
			// The task waits at another replica (or its wait here ended): that replica takes it.
			taken, refusal, ferr := c.Forward(ctx, t.ID, msg)
			switch {
			case ferr != nil:
				return nil, ferr
			case taken:
				return c.Get(ctx, t.ID, scope)
			case refusal != "":
				return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts", Description: refusal})
			}
			if t, err = c.Get(ctx, t.ID, scope); err != nil {
				return nil, err
			}
		case errors.Is(err, ErrNotWaiting):
			// The wait ended (timed out, canceled) since the task was read: answer for its state now.
			if t, err = c.Get(ctx, t.ID, scope); err != nil {
				return nil, err
			}
		case ctx.Err() != nil:
			return nil, err
		default:
			return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts", Description: err.Error()})
		}
	}
	if t.Status.State.Terminal() {
		return nil, a2a.ErrUnsupportedOperation.WithMeta("taskId", string(t.ID)).With(fmt.Sprintf(
			"task %s is %s: a task in a terminal state takes no more messages; send the message with contextId %s and without taskId to continue the conversation in a new task",
			t.ID, t.Status.State, t.ContextID))
	}
	return nil, a2a.ErrUnsupportedOperation.WithMeta("taskId", string(t.ID)).With(fmt.Sprintf(
		"task %s is %s: a task takes a follow-up message only while it is TASK_STATE_INPUT_REQUIRED; wait for it (GetTask or SubscribeToTask), cancel it (CancelTask), or send without taskId to start a new task",
		t.ID, t.Status.State))
}

// CheckContext checks the contextId of a new task from the sender (the operator, caller "", or a peer
// member). A context of the sender's continues that conversation; an id no task of this member has
// starts a new conversation under the id the sender chose, as A2A allows. A context is its starter's
// alone, the operator's too: another sender's is refused, so a task of one sender never joins another's
// conversation or reads its history.
func (c Config) CheckContext(ctx context.Context, contextID, caller string) error {
	if len(contextID) > a2a.MaxIDBytes {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.contextId", Description: fmt.Sprintf(
			"%d bytes long: a contextId may be at most %d bytes; use a shorter one, or leave it out and member %s chooses one",
			len(contextID), a2a.MaxIDBytes, c.Member)})
	}
	page, err := c.List(ctx, store.ListQuery{ContextID: contextID, PageSize: 1})
	if err != nil {
		return err
	}
	if len(page.Tasks) > 0 && c.Caller(page.Tasks[0]) != caller {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.contextId", Description: fmt.Sprintf(
			"context %s is not one of your conversations at member %s: a contextId continues a conversation of yours, or starts a new one under an id no one else uses; use the contextId of one of your tasks, choose another id, or leave it out to start a new conversation",
			a2a.CutID(contextID), c.Member)})
	}
	return nil
}

// Earlier is the earlier conversation of t's context: every earlier task of it that ended, as History
// hands it to t.
// Only the tasks of t's sender count: two senders choosing the same new contextId at the same moment
// both pass CheckContext, and neither may read the other's.
func (c Config) Earlier(ctx context.Context, t *a2a.Task) ([]driver.ChatMessage, error) {
	tasks, err := c.ContextTasks(ctx, t)
	if err != nil {
		return nil, err
	}
	caller := c.Caller(t)
	tasks = slices.DeleteFunc(tasks, func(o *a2a.Task) bool { return c.Caller(o) != caller })
	return History(tasks, t.ID), nil
}

// ContextTasks is every task of t's context, t's own included (History leaves it out).
func (c Config) ContextTasks(ctx context.Context, t *a2a.Task) ([]*a2a.Task, error) {
	var tasks []*a2a.Task
	q := store.ListQuery{ContextID: t.ContextID, PageSize: a2a.MaxPageSize}
	for {
		page, err := c.List(ctx, q)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, page.Tasks...)
		if page.NextPageToken == "" {
			return tasks, nil
		}
		q.PageToken = page.NextPageToken
	}
}

// Asking is the running task a question is asked for, and the session's hooks around the wait.
type Asking struct {
	Task  *a2a.Task
	Limit time.Duration
	// Waiting stores the task TASK_STATE_INPUT_REQUIRED with its question as the status message;
	// Resumed stores it working again with the answer in its history. Both hold the session's lock.
	Waiting func(msg *a2a.Message)
	Resumed func(in a2a.Message)
	// TimedOut ends the task with err: its sender did not answer in time.
	TimedOut func(err error)
}

// Ask puts the running task into TASK_STATE_INPUT_REQUIRED with q and waits for its sender's answer,
// then stores the task working again with the answer in its history. A wait past a.Limit ends the task
// failed; the end of ctx ends the wait.
func (c Config) Ask(ctx context.Context, a Asking, q Question) (Reply, error) {
	t := a.Task
	task := string(t.ID)
	fields := map[string]any{"question": q.Text}
	if q.Approval() {
		fields["tool"], fields["input"], fields["hook"] = q.Tool, records.Clip(string(q.Input), records.ClipMax), q.Hook
	}
	ans, err := c.Waiter.Wait(ctx, t.ID, q, a.Limit, func() {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = c.Record(records.TypeInputRequired, task, fields)
		a.Waiting(&a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleAgent,
			Parts: q.Parts(t.ID), TaskID: t.ID, ContextID: t.ContextID})
	})
	if errors.Is(err, ErrTimedOut) {
		a.TimedOut(&InputTimeout{Limit: a.Limit})
		return Reply{}, context.Cause(ctx)
	}
	if err != nil {
		return Reply{}, err
	}
	in := *ans.Message
	in.TaskID, in.ContextID, in.Role = t.ID, t.ContextID, a2a.RoleUser
	if in.MessageID == "" {
		in.MessageID = a2a.MessageID(ids.New(ids.PrefixMessage))
	}
	a.Resumed(in)
	got := map[string]any{}
	if q.Approval() {
		got["decision"], got["reason"] = ans.Reply.Decision, ans.Reply.Reason
	} else {
		got["answer"] = records.Clip(ans.Reply.Text, records.ClipMax)
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = c.Record(records.TypeInputReceived, task, got)
	ans.Resumed()
	return ans.Reply, nil
}

// Approval is the outcome of asking the task's sender to approve a tool call a hook asked about
// (reply, or err when the sender did not answer): the refusal text when it may not run.
func Approval(reply Reply, err error, q Question, hookReason string) (string, bool) {
	if err != nil {
		return fmt.Sprintf("not run: the task's sender was asked to approve it and did not answer (%v)", err), false
	}
	if reply.Decision == Allow {
		return "", true
	}
	why := reply.Reason
	if why == "" {
		why = hookReason
	}
	if why == "" {
		why = "no reason given"
	}
	return fmt.Sprintf("denied by the task's sender, asked by policy %s: %s", q.Hook, why), false
}

// AnswerData makes a data answer the task's: a data artifact, and the status message's data part. The
// data artifact goes before the response artifact that holds its JSON as text (first when there is
// none), the richest part first: a client reading only the first artifact gets the data.
func AnswerData(t *a2a.Task, data json.RawMessage) {
	part := a2a.Part{Data: data, MediaType: "application/json"}
	at := slices.IndexFunc(t.Artifacts, func(a a2a.Artifact) bool { return a.Name == "response" })
	if at < 0 {
		at = 0
	}
	t.Artifacts = slices.Insert(t.Artifacts, at, a2a.Artifact{ArtifactID: ids.New("art_"), Name: "data", Parts: []a2a.Part{part}})
	if m := t.Status.Message; m != nil {
		m.Parts = []a2a.Part{part}
	}
}

// Artifacts returns the artifacts of the files the task t wrote under the workdir's out/artifacts/
// since before; a large one is kept under ArtifactsRoot/<task id>/ and served by the door, and on a
// member's replicas moved from there into the store they share (keepShared).
func (c Config) Artifacts(ctx context.Context, t *a2a.Task, before map[string]Stamp) ([]a2a.Artifact, error) {
	keep := filepath.Join(c.ArtifactsRoot, string(t.ID))
	files, err := Collect(c.Workdir, before, keep)
	var out []a2a.Artifact
	shared := c.Files != nil // every kept file moved into the shared store: none is left under keep
	for _, f := range files {
		if f.Kept != "" && c.Files != nil {
			var kerr error
			if f, kerr = c.keepShared(ctx, t.ID, f); kerr != nil {
				shared = false
				err = errors.Join(err, kerr)
			}
		}
		a := a2a.Artifact{ArtifactID: ids.New("art_"), Name: f.Name}
		base := f.Name[strings.LastIndexByte(f.Name, '/')+1:]
		switch {
		case f.Refused != "":
			a.Parts = []a2a.Part{a2a.TextPart("refused: " + f.Refused)}
			a.Metadata = map[string]any{ids.Meta: map[string]any{"refused": true}}
			// A record the trace cannot take is lost; the work it records goes on without it.
			_ = c.Record(records.TypeArtifactRefused, string(t.ID), map[string]any{"name": f.Name, "reason": f.Refused})
		case f.Kept != "":
			a.Parts = []a2a.Part{{URL: c.artifactURL(t.ID, f.Name), MediaType: f.MediaType, Filename: base}}
		default:
			a.Parts = []a2a.Part{{Raw: f.Bytes, MediaType: f.MediaType, Filename: base}}
		}
		out = append(out, a)
	}
	if shared && len(files) > 0 {
		// The directories Collect made for the files moved; the caller logs what is left behind.
		if rerr := os.RemoveAll(keep); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the copies of the files moved to the shared store: %w", rerr))
		}
	}
	return out, err
}

// artifactURL is where the door serves a kept file of a task.
func (c Config) artifactURL(id a2a.TaskID, name string) string {
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.TrimSuffix(c.DoorURL, "/") + "/tasks/" + url.PathEscape(string(id)) + "/artifacts/" + strings.Join(segs, "/")
}

// KeptFile is the kept file, under ArtifactsRoot, of the artifact named name of the task id in scope:
// its path and media type. A task outside scope, or without such a kept file, is not found.
func (c Config) KeptFile(ctx context.Context, id a2a.TaskID, name string, scope store.Scope) (string, string, error) {
	t, err := c.Get(ctx, id, scope)
	if err != nil {
		return "", "", err
	}
	for _, a := range t.Artifacts {
		if a.Name == name && len(a.Parts) == 1 && a.Parts[0].URL != "" {
			return filepath.Join(c.ArtifactsRoot, string(t.ID), filepath.FromSlash(name)), a.Parts[0].MediaType, nil
		}
	}
	return "", "", fmt.Errorf("task %s has no artifact %q served by URL: %w", t.ID, a2a.CutID(name), store.ErrNotFound)
}

// RemoveKept deletes, under root, the kept files of tasks: what retention does with them once
// the store has removed the tasks (store.Config.Removed). A task that kept nothing is no error.
func RemoveKept(root string, tasks []a2a.TaskID) error {
	var errs []error
	for _, id := range tasks {
		if name := string(id); name != "" && filepath.Base(name) == name && name != "." && name != ".." {
			errs = append(errs, os.RemoveAll(filepath.Join(root, name)))
		}
	}
	return errors.Join(errs...)
}
