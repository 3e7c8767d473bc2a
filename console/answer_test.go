package console

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// startApprovals runs deploy/examples/approvals (a copy, its door on port 0) with a console, and returns
// the console's browser, logged in, its CSRF token and a client of clerk's door.
func startApprovals(t *testing.T) (*browser, string, *a2a.Client) {
	t.Helper()
	a := startApprovalsFormation(t)
	b := newBrowser(t, a.base)
	return b, b.login(a.console), a.clerk
}

// approvals is the approvals example's formation (clerk, whose ask-first hook asks before session-status
// runs) with its console.
type approvals struct {
	console *Console
	base    string
	clerk   *a2a.Client
}

// startApprovalsFormation copies deploy/examples/approvals into a temporary directory, its door on port
// 0, and starts it with a console.
func startApprovalsFormation(t *testing.T) *approvals {
	t.Helper()
	root := t.TempDir()
	src := "../deploy/examples/approvals"
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "roster.yaml" {
			b = []byte(strings.Replace(string(b), "127.0.0.1:7401", "127.0.0.1:0", 1))
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		return os.WriteFile(filepath.Join(root, rel), b, 0o755)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(root, "records")
	f, err := server.StartFormation(server.FormationConfig{Roster: r, DataDir: filepath.Join(root, ".murmur"),
		RecordsRoot: records, Tokens: server.Tokens{Operator: testOperatorToken, Formation: "formation-token-for-tests"},
		MaxBody: server.DefaultMaxBody, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("formation shutdown: %v", err)
		}
	})
	urls := map[string]string{f.Members[0].Name: f.Members[0].URL}
	c, base := startConsoleFor(t, r, urls, records)
	return &approvals{console: c, base: base, clerk: a2a.NewClient(f.Members[0].URL+"/a2a", testOperatorToken, nil)}
}

// TestAnswerFromTheConsole: a task that waits for an approval shows the question, the tool and its input
// with Approve and Deny; approving runs the tool. A question is answered with text; a bad decision gets
// a clear page and sends nothing.
func TestAnswerFromTheConsole(t *testing.T) {
	b, csrf, clerk := startApprovals(t)
	sendAndWait := func(text string) (string, string) {
		t.Helper()
		code, _, hdr := b.do("POST", "/send", url.Values{"csrf": {csrf}, "member": {"clerk"}, "text": {text}}, nil)
		if code != http.StatusSeeOther {
			t.Fatalf("send %q: %d", text, code)
		}
		page := hdr.Get("Location")
		var body string
		waitFor(t, "the task's page to show its question", func() bool {
			_, body = b.get(page)
			return strings.Contains(body, `id="answer-form"`)
		})
		return page, body
	}
	page, body := sendAndWait("status")
	id := page[strings.LastIndex(page, "/")+1:]
	for _, want := range []string{`id="question">May clerk read its session status?`, `id="question-tool">session-status`, `id="approve-button"`, `id="deny-button"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the waiting task's page lacks %s", want)
		}
	}
	code, body, _ := b.do("POST", "/answer", url.Values{"csrf": {csrf}, "member": {"clerk"}, "task": {id}, "decision": {"maybe"}}, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "is not a decision; approve (allow) or deny") {
		t.Errorf("a bad decision: %d", code)
	}
	code, _, hdr := b.do("POST", "/answer", url.Values{"csrf": {csrf}, "member": {"clerk"}, "task": {id}, "decision": {"allow"}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != page {
		t.Fatalf("approve: %d to %q", code, hdr.Get("Location"))
	}
	waitFor(t, "the approved task to complete", func() bool {
		task, err := clerk.GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
		return err == nil && task.Status.State == a2a.TaskStateCompleted
	})
	task, _ := clerk.GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if a, _ := task.Artifact("response"); !strings.HasPrefix(a.Text(), "ok: {") {
		t.Errorf("the approved task answered %q", a.Text())
	}

	page, body = sendAndWait("convert 5 pounds")
	id = page[strings.LastIndex(page, "/")+1:]
	if !strings.Contains(body, `id="question">Into which currency shall I convert 5 pounds?`) || !strings.Contains(body, `id="answer-text"`) {
		t.Errorf("the question's page lacks the question or the answer box")
	}
	if code, _, _ := b.do("POST", "/answer", url.Values{"csrf": {csrf}, "member": {"clerk"}, "task": {id}, "text": {"yen"}}, nil); code != http.StatusSeeOther {
		t.Fatalf("answer: %d", code)
	}
	waitFor(t, "the answered task to complete", func() bool {
		task, err := clerk.GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
		if err != nil || task.Status.State != a2a.TaskStateCompleted {
			return false
		}
		a, _ := task.Artifact("response")
		return a.Text() == "Converting 5 pounds into yen."
	})
}
