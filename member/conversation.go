package member

import (
	"context"
	"errors"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/store"
)

// scopeOf is the scope of the requests of a task's origin.
func scopeOf(origin Origin) store.Scope {
	if origin.Origin == OriginPeer {
		return store.PeerScope(origin.Caller)
	}
	return store.OperatorScope()
}

// history is the earlier conversation of t's context: every earlier task of it that ended; none for a
// task that started its context.
func (s *Session) history(ctx context.Context, t *a2a.Task) []driver.ChatMessage {
	s.mu.Lock()
	continuing := s.tasks.Continues(t.ID)
	s.mu.Unlock()
	if !continuing {
		return nil
	}
	hist, err := s.talk.Earlier(ctx, t)
	if err != nil {
		s.log.Warn("reading the context's earlier tasks", "task", t.ID, "context", t.ContextID, "err", err)
	}
	return hist
}

// askSender asks the running task's sender q and waits for the answer (converse.Config.Ask).
func (s *Session) askSender(ctx context.Context, task string, q converse.Question) (converse.Reply, error) {
	s.mu.Lock()
	r := s.tasks.Running()
	var t *a2a.Task
	if r != nil && string(r.ID) == task {
		t = r.Task // read under the lock that execute sets it under
	}
	s.mu.Unlock()
	if t == nil {
		return converse.Reply{}, errors.New("no running task to ask for")
	}
	reply, err := s.talk.Ask(ctx, converse.Asking{Task: t, Limit: converse.InputWait(s.cfg.Capsule.Lifecycle.InputWaitSecs), TimedOut: r.Cancel,
		Waiting: func(msg *a2a.Message) {
			s.trc.InputAsked(task, q.Approval(), q.Tool, q.Hook)
			s.mu.Lock()
			s.setStatus(t, a2a.TaskStateInputRequired, "", s.cfg.Now())
			t.Status.Message = msg
			s.storeLocked(t)
			s.mu.Unlock()
		},
		Resumed: func(in a2a.Message) {
			s.mu.Lock()
			t.History = append(t.History, in)
			s.setStatus(t, a2a.TaskStateWorking, "", s.cfg.Now())
			s.storeLocked(t)
			s.mu.Unlock()
		}}, q)
	s.trc.InputAnswered(task, reply.Decision, err)
	return reply, err
}

// storeLocked stores a change of the running task and tells its waiters and streams. s.mu is held.
func (s *Session) storeLocked(t *a2a.Task) {
	if err := s.cfg.Store.Update(context.Background(), t); err != nil {
		s.log.Error("storing a task's state", "task", t.ID, "state", t.Status.State, "err", err)
	}
	s.changedLocked(t)
}

// collectFiles returns the artifacts of the files the task wrote under out/artifacts/ since before. On a
// member's replicas the large ones are kept in the shared store, also once ctx, the task's, has ended
// (a shutdown keeps the artifacts of the task it stopped).
func (s *Session) collectFiles(ctx context.Context, t *a2a.Task, before map[string]converse.Stamp) []a2a.Artifact {
	out, err := s.talk.Artifacts(context.WithoutCancel(ctx), t, before)
	if err != nil {
		s.log.Warn("collecting the task's files under "+converse.ArtifactsDir, "task", t.ID, "err", err)
	}
	return out
}

// ArtifactFile is the kept file of a task's artifact named name, for the door's
// GET /tasks/{id}/artifacts/{name}: its path and media type (converse.Config.KeptFile).
func (s *Session) ArtifactFile(ctx context.Context, id a2a.TaskID, name string, scope store.Scope) (string, string, error) {
	return s.talk.KeptFile(ctx, id, name, scope)
}
