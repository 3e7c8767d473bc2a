package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// A member of one process answers GetTask from its cache of recent tasks: every write through the
// writer (Create, Update, UpdateSoon, EndAll) and every removal by the sweeper is in the cache by the
// time it is answered, so a read never finds a task older than a write that was answered; a task read
// from the database is cached after it; a replica keeps no cache.
func TestCacheOfOneProcess(t *testing.T) {
	now := epoch.Add(30 * 24 * time.Hour)
	s, dsn := open(t, Config{Retention: roster.Retention{MaxAge: 24 * time.Hour, MaxTasks: 100}, Now: func() time.Time { return now }})
	ctx := t.Context()
	cached := func(id a2a.TaskID) a2a.TaskState {
		t.Helper()
		body, _, ok := s.cache.Get(id)
		if !ok {
			return ""
		}
		tk, err := store.Decode(id, body)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Status.State
	}
	tk := task(1, "ctx", a2a.TaskStateSubmitted)
	tk.Status.Timestamp = a2a.NewTimestamp(now)
	mustCreate(t, s, tk)
	if got := cached(tk.ID); got != a2a.TaskStateSubmitted {
		t.Errorf("after Create the cache holds %q", got)
	}
	tk.Status.State = a2a.TaskStateWorking
	s.UpdateSoon(tk)
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cached(tk.ID); got != a2a.TaskStateWorking {
		t.Errorf("after UpdateSoon's commit the cache holds %q", got)
	}
	if _, err := s.EndAll(ctx, []a2a.TaskID{tk.ID}, a2a.TaskStateCanceled, "stopped", now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, tk.ID)
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("after EndAll: %v %v", got, err)
	}
	if got := cached(tk.ID); got != a2a.TaskStateCanceled {
		t.Errorf("the read after EndAll left %q in the cache", got)
	}

	// A change made behind the store's back is not seen once the task is cached: the process holds
	// its database alone, so that cannot happen but by hand.
	if _, err := connect(t, dsn).Exec(ctx, `UPDATE tasks SET context_id = 'by hand' WHERE id = $1`, string(tk.ID)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, tk.ID); err != nil || got.ContextID != "ctx" {
		t.Errorf("a cached task read as %v, %v", got, err)
	}

	now = now.Add(48 * time.Hour)
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep: %d, %v", n, err)
	}
	if _, err := s.Get(ctx, tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a swept task: %v, want ErrNotFound", err)
	}

	r, _ := open(t, Config{Replica: "r1"})
	if r.cache != nil {
		t.Error("a replica keeps a cache")
	}
}

// A member of one process looks a message up in its filter first (store.MessageFilter): a message no
// task came from is not found, one that created a task is, and a store opened again on the database
// reads the messages its tasks came from in at the first lookup, so a retry after a restart finds its
// task.
func TestMessageFilterOfOneProcess(t *testing.T) {
	s, dsn := open(t, Config{})
	ctx := t.Context()
	tk := task(1, "ctx", a2a.TaskStateSubmitted)
	tk.History[0].MessageID = "msg_one"
	mustCreate(t, s, tk)
	lookup := func(s *Store, msg string) a2a.TaskID {
		t.Helper()
		got, err := s.GetByMessage(ctx, "", msg)
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatalf("GetByMessage(%q): %v", msg, err)
		}
		return got.ID
	}
	if got := lookup(s, "msg_one"); got != tk.ID {
		t.Errorf("GetByMessage(msg_one) = %q; want %s", got, tk.ID)
	}
	if got := lookup(s, "msg_never"); got != "" {
		t.Errorf("a message no task came from found %s", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := open(t, Config{}, dsn)
	if got := lookup(again, "msg_one"); got != tk.ID {
		t.Errorf("after a restart, GetByMessage(msg_one) = %q; want %s (the database's messages read in)", got, tk.ID)
	}
	if got := lookup(again, "msg_never"); got != "" {
		t.Errorf("after a restart, a message no task came from found %s", got)
	}
	replica, _ := open(t, Config{Replica: "r1"}, database(t))
	if replica.messages != nil {
		t.Error("a replica filters messages: another replica creates tasks too")
	}
}
