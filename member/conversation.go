package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/store"
)

// inputTimeout ends a task whose sender did not answer its question within lifecycle.input_wait_secs.
type inputTimeout struct{ limit time.Duration }

func (e *inputTimeout) Error() string {
	return fmt.Sprintf("the task waited %d second(s) for its sender's input (lifecycle.input_wait_secs) and got none",
		int64(e.limit/time.Second))
}

// scopeOf is the scope of the requests of a task's origin.
func scopeOf(origin Origin) store.Scope {
	if origin.Origin == OriginPeer {
		return store.PeerScope(origin.Caller)
	}
	return store.OperatorScope()
}

// followUp takes a message naming an existing task: the answer to a task that waits for its sender
// (TASK_STATE_INPUT_REQUIRED), which it resumes; any other state refuses it, saying what to do.
func (s *Session) followUp(ctx context.Context, msg *a2a.Message, origin Origin) (*a2a.Task, error) {
	scope := scopeOf(origin)
	t, err := s.get(ctx, msg.TaskID, scope)
	if err != nil {
		return nil, err
	}
	if msg.ContextID != "" && msg.ContextID != t.ContextID {
		return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "message.contextId", Description: fmt.Sprintf(
			"task %s belongs to context %s, not %s; leave contextId out of a follow-up or name the task's own", t.ID, t.ContextID, a2a.CutID(msg.ContextID))})
	}
	if t.Status.State == a2a.TaskStateInputRequired {
		err := s.waiter.Deliver(ctx, t.ID, msg)
		switch {
		case err == nil:
			return s.get(ctx, t.ID, scope)
		case errors.Is(err, converse.ErrNotWaiting):
			// The wait ended (timed out, canceled) since the task was read: answer for its state now.
			if t, err = s.get(ctx, t.ID, scope); err != nil {
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

// checkContext refuses a contextId that names no conversation of the sender's: one no task of this
// member has, or another sender's (which is answered the same, so a sender cannot learn it exists). The
// sender is the operator (caller "") or a peer member.
func (s *Session) checkContext(ctx context.Context, contextID string, origin Origin) error {
	page, err := s.cfg.Store.List(ctx, store.ListQuery{ContextID: contextID, PageSize: 1})
	if err != nil {
		return err
	}
	// A context is its starter's alone, the operator's too: a task of another sender never joins it.
	if len(page.Tasks) == 0 || taskCaller(page.Tasks[0]) != origin.Caller {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.contextId", Description: fmt.Sprintf(
			"context %s does not exist at member %s: a contextId continues a conversation this member started for you; use the contextId of one of your tasks, or leave it out to start a new conversation",
			a2a.CutID(contextID), s.cfg.Member)})
	}
	return nil
}

// taskCaller is the member that sent t; "" for the operator.
func taskCaller(t *a2a.Task) string {
	c, _ := ids.Get(murmurMeta(t), ids.MetaCaller).(string)
	return c
}

// history is the earlier conversation of t's context: every earlier task of it that ended; none for a
// task that started its context.
func (s *Session) history(ctx context.Context, t *a2a.Task) []driver.ChatMessage {
	s.mu.Lock()
	continuing := s.continuing[t.ID]
	s.mu.Unlock()
	if !continuing {
		return nil
	}
	var tasks []*a2a.Task
	q := store.ListQuery{ContextID: t.ContextID, PageSize: a2a.MaxPageSize}
	for {
		page, err := s.cfg.Store.List(ctx, q)
		if err != nil {
			s.log.Warn("reading the context's earlier tasks", "task", t.ID, "context", t.ContextID, "err", err)
			return nil
		}
		tasks = append(tasks, page.Tasks...)
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	return converse.History(tasks, t.ID)
}

// askSender puts the running task into TASK_STATE_INPUT_REQUIRED with q and waits for its sender's
// answer, then stores the task working again with the answer in its history. A wait past
// lifecycle.input_wait_secs ends the task failed; Cancel ends the wait.
func (s *Session) askSender(ctx context.Context, task string, q converse.Question) (converse.Reply, error) {
	s.mu.Lock()
	r := s.running
	s.mu.Unlock()
	if r == nil || string(r.id) != task || r.task == nil {
		return converse.Reply{}, errors.New("no running task to ask for")
	}
	t := r.task
	fields := map[string]any{"question": q.Text}
	if q.Approval() {
		fields["tool"], fields["input"], fields["hook"] = q.Tool, records.Clip(string(q.Input), records.ClipMax), q.Hook
	}
	limit := converse.DefaultInputWait
	if w := s.cfg.Capsule.Lifecycle.InputWaitSecs; w != nil {
		limit = time.Duration(*w) * time.Second
	}
	a, err := s.waiter.Wait(ctx, t.ID, q, limit, func() {
		s.records.Write("input_required", task, fields)
		s.mu.Lock()
		s.setStatus(t, a2a.TaskStateInputRequired, "", s.cfg.Now())
		t.Status.Message = &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleAgent,
			Parts: q.Parts(t.ID), TaskID: t.ID, ContextID: t.ContextID}
		s.storeLocked(t)
		s.mu.Unlock()
	})
	if errors.Is(err, converse.ErrTimedOut) {
		r.cancel(&inputTimeout{limit: limit})
		return converse.Reply{}, context.Cause(ctx)
	}
	if err != nil {
		return converse.Reply{}, err
	}
	in := *a.Message
	in.TaskID, in.ContextID, in.Role = t.ID, t.ContextID, a2a.RoleUser
	if in.MessageID == "" {
		in.MessageID = a2a.MessageID(ids.New(ids.PrefixMessage))
	}
	s.mu.Lock()
	t.History = append(t.History, in)
	s.setStatus(t, a2a.TaskStateWorking, "", s.cfg.Now())
	s.storeLocked(t)
	s.mu.Unlock()
	got := map[string]any{}
	if q.Approval() {
		got["decision"], got["reason"] = a.Reply.Decision, a.Reply.Reason
	} else {
		got["answer"] = records.Clip(a.Reply.Text, records.ClipMax)
	}
	s.records.Write("input_received", task, got)
	a.Resumed()
	return a.Reply, nil
}

// storeLocked stores a change of the running task and tells its waiters and streams. s.mu is held.
func (s *Session) storeLocked(t *a2a.Task) {
	if err := s.cfg.Store.Update(context.Background(), t); err != nil {
		s.log.Error("storing a task's state", "task", t.ID, "state", t.Status.State, "err", err)
	}
	s.notifyLocked(t.ID)
	s.publish(t)
}

// approve asks the running task's sender whether a tool call a hook asked about may run; the refusal
// text when it may not.
func (s *Session) approve(ctx context.Context, task string, q converse.Question, hookReason string) (string, bool) {
	reply, err := s.askSender(ctx, task, q)
	if err != nil {
		return fmt.Sprintf("not run: the task's sender was asked to approve it and did not answer (%v)", err), false
	}
	if reply.Decision == converse.Allow {
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

// answerData makes a data answer the task's: a data artifact, and the status message's data part.
func answerData(t *a2a.Task, data json.RawMessage) {
	part := a2a.Part{Data: data, MediaType: "application/json"}
	t.Artifacts = append(t.Artifacts, a2a.Artifact{ArtifactID: ids.New("art_"), Name: "data", Parts: []a2a.Part{part}})
	if m := t.Status.Message; m != nil {
		m.Parts = []a2a.Part{part}
	}
}

// artifactsRoot is where files too large to carry inline are kept for their URL.
func (s *Session) artifactsRoot() string {
	if s.cfg.ArtifactsDir != "" {
		return s.cfg.ArtifactsDir
	}
	return filepath.Join(s.records.Dir(), "artifacts")
}

// collectFiles returns the artifacts of the files the task wrote under out/artifacts/ since before.
func (s *Session) collectFiles(t *a2a.Task, before map[string]converse.Stamp) []a2a.Artifact {
	files, err := converse.Collect(s.workdir(), before, filepath.Join(s.artifactsRoot(), string(t.ID)))
	if err != nil {
		s.log.Warn("collecting the task's files under "+converse.ArtifactsDir, "task", t.ID, "err", err)
	}
	var out []a2a.Artifact
	for _, f := range files {
		a := a2a.Artifact{ArtifactID: ids.New("art_"), Name: f.Name}
		base := f.Name[strings.LastIndexByte(f.Name, '/')+1:]
		switch {
		case f.Refused != "":
			a.Parts = []a2a.Part{a2a.TextPart("refused: " + f.Refused)}
			a.Metadata = map[string]any{ids.Meta: map[string]any{"refused": true}}
			s.records.Write("artifact_refused", string(t.ID), map[string]any{"name": f.Name, "reason": f.Refused})
		case f.Kept != "":
			a.Parts = []a2a.Part{{URL: s.artifactURL(t.ID, f.Name), MediaType: f.MediaType, Filename: base}}
		default:
			a.Parts = []a2a.Part{{Raw: f.Bytes, MediaType: f.MediaType, Filename: base}}
		}
		out = append(out, a)
	}
	return out
}

// artifactURL is where the door serves a kept file of a task.
func (s *Session) artifactURL(id a2a.TaskID, name string) string {
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.TrimSuffix(s.cfg.DoorURL, "/") + "/tasks/" + url.PathEscape(string(id)) + "/artifacts/" + strings.Join(segs, "/")
}

// ArtifactFile is the kept file of a task's artifact named name, for the door's
// GET /tasks/{id}/artifacts/{name}: its path and media type. A task outside scope, or without such a
// kept file, is not found.
func (s *Session) ArtifactFile(ctx context.Context, id a2a.TaskID, name string, scope store.Scope) (string, string, error) {
	t, err := s.get(ctx, id, scope)
	if err != nil {
		return "", "", err
	}
	for _, a := range t.Artifacts {
		if a.Name == name && len(a.Parts) == 1 && a.Parts[0].URL != "" {
			return filepath.Join(s.artifactsRoot(), string(id), filepath.FromSlash(name)), a.Parts[0].MediaType, nil
		}
	}
	return "", "", fmt.Errorf("task %s has no artifact %q served by URL: %w", id, a2a.CutID(name), store.ErrNotFound)
}
