package server

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/roster"
)

// runtimeFiles is a member, lead, that delegates every task to helper, an agent sub-capsule: both
// sessions stage their tools' manifests into a runtime directory of their own under the member's run/.
var runtimeFiles = map[string]string{
	"roster.yaml":             soloRoster,
	"lead/murmur.yaml":        leadWith("./helper", ""),
	"lead/script.yaml":        "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: helper, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{.message}}\"\n",
	"lead/helper/murmur.yaml": agentOf("helper"),
	"lead/helper/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'helped: {{.task}}'\n",
}

// entries lists what is in dir, sorted; nothing when dir does not exist.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// copyTree copies the directory from to to, files and directories only.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRuntimeDirectoriesAreThoseOfLiveSessions starts one member again and again on the same data
// directory and runs a task each time, which delegates to a sub-session sharing the member's runtime
// root. While the member runs, run/ holds exactly the runtime directory of its live session (the ended
// sub-session removed its own, and the sub-session left the member's alone); after a shutdown, nothing.
// One stop leaves a directory behind as a killed process does (a copy of the live one under another
// session id, with a link out of it): the next start removes it without following the link.
func TestRuntimeDirectoriesAreThoseOfLiveSessions(t *testing.T) {
	root := t.TempDir()
	for name, body := range runtimeFiles {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(root, "data", "members", "lead", "run")
	outside := filepath.Join(root, "outside")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("not the runtime's"), 0o644)

	const rounds, killed = 5, 2
	var left string // the directory the "killed" round left
	for i := range rounds {
		f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
			Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		live := f.Members[0].Session.ID()
		c := a2a.NewClient(f.Members[0].URL+"/a2a", "op", nil)
		res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{
			Message: &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("job")}}})
		if err != nil || res.Task == nil || res.Task.Status.State != a2a.TaskStateCompleted || !strings.Contains(answerOf(res.Task), "helped: job") {
			shutdown(t, f)
			t.Fatalf("start %d: the task that delegates: %+v %v", i, res, err)
		}
		if got := entries(t, run); !slices.Equal(got, []string{live}) {
			t.Errorf("start %d: run/ holds %v while the member runs, want only its live session's directory %s", i, got, live)
		}
		if i == killed {
			// What a killed process leaves: its session's directory, tools and all, and a link out of it.
			left = filepath.Join(run, ids.New(ids.PrefixSession))
			copyTree(t, filepath.Join(run, live), left)
			os.WriteFile(filepath.Join(left, "mcp.json"), []byte(`{"mcpServers":{}}`), 0o600)
			if err := os.Symlink(outside, filepath.Join(left, "escape")); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = f.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("shutdown %d: %v", i, err)
		}
		want := []string(nil)
		if i == killed {
			want = []string{filepath.Base(left)}
		}
		if got := entries(t, run); !slices.Equal(got, want) {
			t.Errorf("after shutdown %d: run/ holds %v, want %v", i, got, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "not the runtime's" {
		t.Errorf("the file a left directory linked to: %q %v; removing the directory followed the link", b, err)
	}
}

// TestRuntimeRootThatIsALinkIsRefused: a member whose run/ is a symbolic link does not start, says
// why and what to do, and removes nothing where the link points.
func TestRuntimeRootThatIsALinkIsRefused(t *testing.T) {
	root := t.TempDir()
	for name, body := range runtimeFiles {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(root, "elsewhere")
	victim := filepath.Join(elsewhere, ids.New(ids.PrefixSession))
	os.MkdirAll(victim, 0o755)
	os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o644)
	member := filepath.Join(root, "data", "members", "lead")
	os.MkdirAll(member, 0o700)
	if err := os.Symlink(elsewhere, filepath.Join(member, "run")); err != nil {
		t.Fatal(err)
	}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
		Tokens: Tokens{Operator: "op", Formation: "fm"}, Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		shutdown(t, f)
		t.Fatal("a member whose run/ is a symbolic link started")
	}
	for _, want := range []string{filepath.Join(member, "run"), "symbolic link", "replace it with a directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("what the link points to was touched: %v", err)
	}
}
