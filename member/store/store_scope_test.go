package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// peerTask is storeTask n sent by caller ("" for the operator's).
func peerTask(n int, caller string) *a2a.Task {
	t := storeTask(n, "ctx", a2a.TaskStateCompleted)
	meta := map[string]any{"member": "solo", "origin": "operator", "trust": "trusted"}
	if caller != "" {
		meta["origin"], meta["caller"], meta["trust"] = "peer", caller, "untrusted"
	}
	t.Metadata = map[string]any{ids.Meta: meta}
	return t
}

// The store keeps who sent each task, and a peer's scope sees only its own, in Get, getWithCaller and list,
// through the cache and past it.
func TestStoreCallerScope(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	for n, caller := range []string{"", "lead", "critic", "lead"} {
		if err := s.Create(ctx, peerTask(n+1, caller)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cached := range []bool{true, false} {
		if !cached {
			s.cache = newTaskCache(cachedTasks, cachedBytes)
		}
		for n, caller := range []string{"", "lead", "critic", "lead"} {
			_, got, err := s.getWithCaller(ctx, a2a.TaskID(fmt.Sprintf("tsk_%02d", n+1)))
			if err != nil || got != caller {
				t.Errorf("cached %v: task %d sent by %q, got %q (%v)", cached, n+1, caller, got, err)
			}
		}
	}
	page, err := s.list(ctx, ListQuery{Caller: "lead", PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]a2a.TaskID{"tsk_04"}, taskIDs(page.Tasks)); diff != "" || page.Total != 2 || page.NextPageToken == "" {
		t.Fatalf("lead's first page (-want +got):\n%s total %d", diff, page.Total)
	}
	// A page token carries its filter: lead's token does not page through everything.
	if _, err := s.list(ctx, ListQuery{PageSize: 1, PageToken: page.NextPageToken}); err == nil {
		t.Error("a caller's page token was accepted for an unfiltered list")
	}
	page, err = s.list(ctx, ListQuery{Caller: "lead", PageSize: 1, PageToken: page.NextPageToken})
	if err != nil || !cmp.Equal([]a2a.TaskID{"tsk_02"}, taskIDs(page.Tasks)) {
		t.Fatalf("lead's second page: %v %v", taskIDs(page.Tasks), err)
	}
}

// A store written before callers were kept gets them on open: a peer's old task belongs to no member
// (only the operator sees it), an operator's stays the operator's.
func TestStoreMigratesCallers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema[0] + `; PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	for n, origin := range []string{"operator", "peer"} {
		task := fmt.Sprintf(`{"id":"tsk_%d","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"murmur":{"origin":%q}}}`, n, origin)
		if _, err := db.Exec(`INSERT INTO tasks (id, context_id, state, created, task) VALUES (?, 'c', 'TASK_STATE_COMPLETED', 0, ?)`,
			fmt.Sprintf("tsk_%d", n), task); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range map[a2a.TaskID]string{"tsk_0": "", "tsk_1": "?"} {
		_, got, err := s.getWithCaller(context.Background(), id)
		if err != nil || got != want {
			t.Errorf("%s: caller %q (%v), want %q", id, got, err, want)
		}
	}
}

// A ListTasks page ends once it holds maxPageBytes of tasks, however many were asked for, and the next
// page goes on from there.
func TestStoreListPageBytes(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	const n = 6
	for i := 1; i <= n; i++ {
		task := storeTask(i, "ctx", a2a.TaskStateCompleted)
		task.History[0].Parts = []a2a.Part{a2a.TextPart(strings.Repeat("x", maxPageBytes/3))}
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	var pages [][]a2a.TaskID
	token := ""
	for {
		page, err := s.list(ctx, ListQuery{PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, taskIDs(page.Tasks))
		if page.Total != n {
			t.Errorf("total %d, want %d", page.Total, n)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	want := [][]a2a.TaskID{{"tsk_06", "tsk_05", "tsk_04"}, {"tsk_03", "tsk_02", "tsk_01"}}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
}

// The cache is bounded in bytes as well as in entries; the newest entry stays even when it alone is
// over the bound.
func TestTaskCacheBytes(t *testing.T) {
	c := newTaskCache(100, 10)
	c.put("a", "", []byte("12345"))
	c.put("b", "", []byte("12345"))
	c.put("c", "", []byte("1"))
	if _, _, ok := c.get("a"); ok {
		t.Error("a is still cached past the byte bound")
	}
	for _, id := range []a2a.TaskID{"b", "c"} {
		if _, _, ok := c.get(id); !ok {
			t.Errorf("%s was evicted", id)
		}
	}
	c.put("big", "", []byte("0123456789abc"))
	if _, _, ok := c.get("big"); !ok || c.bytes != 13 || c.order.Len() != 1 {
		t.Errorf("after an entry over the bound alone: %d bytes in %d entries", c.bytes, c.order.Len())
	}
	c.put("big", "", []byte("1"))
	if c.bytes != 1 {
		t.Errorf("replacing an entry: %d bytes counted, want 1", c.bytes)
	}
}

// A read that missed the cache fills it, so an old task read again (a GetTask after many writes) is the
// cache's; a read that a write to the cache came during does not, since it may hold the version the
// write replaced; removing an entry gives back its bytes.
func TestTaskCacheFill(t *testing.T) {
	c := newTaskCache(100, 1000)
	mark := c.mark()
	c.fill("a", "lead", []byte("old"), mark)
	if body, caller, ok := c.get("a"); !ok || string(body) != "old" || caller != "lead" {
		t.Fatalf("after a fill: %q %q %v", body, caller, ok)
	}
	mark = c.mark()
	c.put("b", "", []byte("new")) // a write between the read's start and its fill
	c.fill("c", "", []byte("stale?"), mark)
	if _, _, ok := c.get("c"); ok {
		t.Error("a read that a write came during filled the cache")
	}
	mark = c.mark()
	c.fill("b", "", []byte("older"), mark) // cached by now: the cache's version stays
	if body, _, _ := c.get("b"); string(body) != "new" {
		t.Errorf("a fill replaced a cached entry: %q", body)
	}
	mark = c.mark()
	c.remove("a")
	c.fill("a", "lead", []byte("old"), mark) // removed (ended, swept) while the read was on its way
	if _, _, ok := c.get("a"); ok {
		t.Error("a read filled the cache with a task removed during it")
	}
	if c.bytes != len("new") {
		t.Errorf("%d bytes counted after a removal, want %d", c.bytes, len("new"))
	}
}

// Through the store: a task evicted from the cache is read from the file once, then from the cache.
func TestGetFillsTheCache(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	task := &a2a.Task{ID: "tsk_old", ContextID: "ctx_1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	s.cache.remove(task.ID) // as if 4,096 tasks had been written after it
	if _, err := s.Get(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.cache.get(task.ID); !ok {
		t.Fatal("a task read from the file is not cached after it")
	}
}
