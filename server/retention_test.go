package server

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

// The roster's store.retention reaches every member's store; a capsule's own keys override it.
func TestFormationThreadsRetentionToTheStores(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"own/murmur.yaml":   "name: own\nscript: {command: [cat]}\nstore: {retention: {max_tasks: 7}}\n",
		"plain/murmur.yaml": "name: plain\nscript: {command: [cat]}\n",
		"roster.yaml": "formation: f\nmembers:\n  - {name: own, capsule: ./own, listen: '127.0.0.1:0'}\n  - {name: plain, capsule: ./plain, listen: '127.0.0.1:0'}\n" +
			"store:\n  retention: {max_age: 48h, max_tasks: 50}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	want := map[string]roster.Retention{
		"own":   {MaxAge: 48 * time.Hour, MaxTasks: 7},
		"plain": {MaxAge: 48 * time.Hour, MaxTasks: 50},
	}
	for _, m := range f.Members {
		if got := m.store.(*store.Store).Retention(); got != want[m.Name] {
			t.Errorf("member %s keeps %+v, want %+v", m.Name, got, want[m.Name])
		}
	}
}

// A rejection is answered at once and GetTask finds it, although the store writes it later in a batch.
func TestRejectedTaskIsFoundAtOnce(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	running := sendTask(t, c, "work", true)
	f.waitState(c, running.ID, a2ago.TaskStateWorking)
	rejected := sendTask(t, c, "too many", true)
	if rejected.Status.State != a2ago.TaskStateRejected {
		t.Fatalf("a task sent to a busy member is %s", rejected.Status.State)
	}
	got, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: rejected.ID})
	if err != nil || got.Status.State != a2ago.TaskStateRejected || statusText(got) != "task rejected: capsule is busy" {
		t.Errorf("GetTask of the rejection: %+v %v", got, err)
	}
}

// The files a formation keeps for the artifacts too large to carry inline go when retention removes
// their task, and only then: the task it keeps keeps its file.
func TestRetentionDeletesKeptArtifactFiles(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":       "formation: f\nmembers:\n  - {name: maker, capsule: ./maker, listen: '127.0.0.1:0'}\n",
		"maker/murmur.yaml": "name: maker\nstore: {retention: {max_tasks: 1}}\nscript: {command: [sh, -c, 'mkdir -p out/artifacts; head -c 300000 /dev/zero > out/artifacts/big.bin; echo made']}\n",
	}, Tokens{Operator: "op-retention", Formation: "fm-retention"})
	kept := filepath.Join(fx.root, "data", "members", "maker", "artifacts")
	var ids []string
	for i := range 3 {
		task := fx.ask(t, "maker", "make")
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("task %d: %s", i, task.Status.State)
		}
		if _, err := os.Stat(filepath.Join(kept, string(task.ID), "big.bin")); err != nil {
			t.Fatalf("task %d kept no file: %v", i, err)
		}
		ids = append(ids, string(task.ID))
	}
	removed, err := fx.f.Members[0].store.(*store.Store).Sweep(context.Background())
	if err != nil || removed != 2 {
		t.Fatalf("Sweep removed %d (%v), want the 2 oldest tasks", removed, err)
	}
	for i, id := range ids {
		_, err := os.Stat(filepath.Join(kept, id))
		if gone := errors.Is(err, fs.ErrNotExist); gone != (i < 2) {
			t.Errorf("task %d's kept files: %v, want them gone only for the 2 removed tasks", i, err)
		}
	}
}
