package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds a Chromium to drive: MUR_CHROMIUM, else the usual names on PATH. Without one the
// browser tests are skipped with one line saying so (.ci/run installs Debian's chromium).
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("MUR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary found (install Debian's chromium package, as .ci/run does, or set MUR_CHROMIUM): the console's browser tests are skipped")
	return ""
}

// shotDir is where the screenshots go: $MUR_TEST_OUTPUT/console when that is set, else a temporary
// directory of the test.
func shotDir(t *testing.T) string {
	if d := os.Getenv("MUR_TEST_OUTPUT"); d != "" {
		dir := filepath.Join(d, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// newChrome starts a headless Chromium at 1280x800 and returns a tab in it.
func newChrome(t *testing.T) context.Context {
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// poll waits until a JavaScript expression is true in the page (bounded only against a hung test).
func poll(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	do(t, ctx, what, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(80*time.Second), chromedp.WithPollingInterval(20*time.Millisecond))(ctx, tg)
		return chromedp.Void{}, err
	})
}

// text reads an element's text as the page has it now (the live parts of a page are replaced as they
// change, so a node found a moment ago may be gone).
func text(t *testing.T, ctx context.Context, what, sel string) string {
	t.Helper()
	return get(t, ctx, what, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)))
}

func shot(t *testing.T, ctx context.Context, dir, name string) string {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var taskPath = regexp.MustCompile(`^/members/lead/tasks/(tsk_[a-z0-9]+)$`)

func TestBrowser(t *testing.T) {
	chromiumPath(t)
	h := startHello(t, true)
	ctx := newChrome(t)
	dir := shotDir(t)
	t.Logf("screenshots in %s", dir)

	t.Run("the formation page lists the members and draws the graph", func(t *testing.T) {
		do(t, ctx, "log in and open the formation",
			chromedp.Navigate(h.console.LoginURL(h.base)),
			chromedp.WaitVisible(`tr.member[data-member="lead"]`),
			chromedp.WaitVisible(`tr.member[data-member="worker"]`),
			chromedp.WaitVisible(`svg.graph g.node[data-member="lead"]`),
			chromedp.WaitVisible(`svg.graph g.node[data-member="worker"]`),
			chromedp.WaitReady(`svg.graph line.edge[data-from="lead"][data-to="worker"]`),
		)
		if n := get(t, ctx, "edges", chromedp.Evaluate[int](`document.querySelectorAll('svg.graph line.edge').length`)); n != 1 {
			t.Errorf("the graph draws %d edges, want 1 (lead may call worker)", n)
		}
		doors := text(t, ctx, "members table", `table.members`)
		for _, u := range []string{h.urls["lead"] + "/a2a", h.urls["worker"] + "/a2a"} {
			if !strings.Contains(doors, u) {
				t.Errorf("the members table lacks door %s:\n%s", u, doors)
			}
		}
		poll(t, ctx, "the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
		poll(t, ctx, "both members idle", `document.querySelectorAll('svg.graph g.node.ns-idle').length === 2`)
		shot(t, ctx, dir, "formation.png")
	})

	var leadTask string
	t.Run("sending from the page shows the lead's task complete live with worker's call linked", func(t *testing.T) {
		do(t, ctx, "send ask worker: 2 + 3 from the formation page",
			chromedp.SetValue(`#send-member`, "lead"),
			chromedp.SendKeys(`#send-text`, "ask worker: 2 + 3"),
			chromedp.Click(`#send-button`),
			chromedp.WaitVisible(`#task-state`),
		)
		loc := get(t, ctx, "location", chromedp.Location())
		m := taskPath.FindStringSubmatch(strings.TrimPrefix(loc, h.base))
		if m == nil {
			t.Fatalf("after sending, the browser is at %s, want lead's task page", loc)
		}
		leadTask = m[1]
		// Worker holds its task until released: the call is in flight, shown live on the task page.
		poll(t, ctx, "worker's call shown in flight", `!!document.querySelector('a.callee')`)
		if st := get(t, ctx, "state", chromedp.Evaluate[string](`document.querySelector('#task-state').dataset.state`)); st == "completed" {
			t.Fatalf("lead's task is %s while worker is still held", st)
		}
		shot(t, ctx, dir, "task-calling.png")

		// The formation's graph shows the call in flight.
		do(t, ctx, "the formation page while worker works", chromedp.Navigate(h.base+"/"),
			chromedp.WaitReady(`svg.graph line.edge.active[data-from="lead"][data-to="worker"]`))
		shot(t, ctx, dir, "formation-calling.png")
		do(t, ctx, "back to lead's task", chromedp.Navigate(loc), chromedp.WaitVisible(`#task-state`))
		poll(t, ctx, "the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
		do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameLoad = true`))
		h.release()
		poll(t, ctx, "lead's task completes on the same page, without a reload",
			`document.querySelector('#task-state').dataset.state === 'completed' && window.__sameLoad === true`)
		workerTasks := h.tasksWithText("worker", "2 + 3")
		if len(workerTasks) != 1 {
			t.Fatalf("worker has %d tasks for 2 + 3, want 1", len(workerTasks))
		}
		want := "/members/worker/tasks/" + string(workerTasks[0].ID)
		href := get(t, ctx, "callee link", chromedp.Evaluate[string](`document.querySelector('a.callee').getAttribute('href')`))
		if href != want {
			t.Errorf("the member call links to %q, want %q", href, want)
		}
		do(t, ctx, "the formation page after the call", chromedp.Navigate(h.base+"/"), chromedp.WaitVisible(`svg.graph`))
		poll(t, ctx, "the graph's call no longer in flight", `!document.querySelector('svg.graph line.edge.active')`)
	})

	t.Run("the task page shows the tool calls and the answer", func(t *testing.T) {
		if leadTask == "" {
			t.Skip("no task was sent")
		}
		do(t, ctx, "reload the task page", chromedp.Navigate(h.base+"/members/lead/tasks/"+leadTask), chromedp.WaitVisible(`#task-answer`))
		if a := text(t, ctx, "answer", `#task-answer`); strings.TrimSpace(a) != "worker says: 5" {
			t.Errorf("answer %q, want %q", a, "worker says: 5")
		}
		if tool := text(t, ctx, "tool call", `.tool[data-tool="call-member"]`); !strings.Contains(tool, "call-member") ||
			!strings.Contains(tool, "ok") || !strings.Contains(tool, "Called worker: started") || !strings.Contains(tool, "2 + 3") {
			t.Errorf("the call-member tool call shows %q: want its name, status, summary and the task it sent", tool)
		}
		if n := get(t, ctx, "turns", chromedp.Evaluate[int](`document.querySelectorAll('ol.turns > li.turn').length`)); n != 3 {
			t.Errorf("%d turns shown, want 3 (call, wait, answer)", n)
		}
		timeline := text(t, ctx, "timeline", `table.timeline`)
		for _, rec := range []string{"task_start", "inference", "member_call_start", "tool_call", "member_call", "task_continued", "task_end"} {
			if !strings.Contains(timeline, rec) {
				t.Errorf("the timeline lacks %s:\n%s", rec, timeline)
			}
		}
		shot(t, ctx, dir, "task.png")
		callee := get(t, ctx, "callee link", chromedp.Evaluate[string](`document.querySelector('#task a.callee').getAttribute('href')`))
		do(t, ctx, "follow the call to worker's task", chromedp.Navigate(h.base+callee), chromedp.WaitVisible(`#task-answer`), chromedp.WaitVisible(`#caller-task`))
		if a := text(t, ctx, "worker's answer", `#task-answer`); strings.TrimSpace(a) != "5" {
			t.Errorf("worker's answer %q, want 5", a)
		}
		if back := get(t, ctx, "caller link", chromedp.Evaluate[string](`document.querySelector('#caller-task').getAttribute('href')`)); back != "/members/lead/tasks/"+leadTask {
			t.Errorf("worker's task links back to %q", back)
		}
	})

	t.Run("keyboard and phone size", func(t *testing.T) {
		if leadTask == "" {
			t.Skip("no task was sent")
		}
		do(t, ctx, "open the task page", chromedp.Navigate(h.base+"/members/lead/tasks/"+leadTask), chromedp.WaitVisible(`#task-answer`),
			chromedp.KeyEvent("\t"))
		if cls := get(t, ctx, "focus", chromedp.Evaluate[string](`document.activeElement.className`)); cls != "skip" {
			t.Errorf("the first Tab focuses %q, want the skip link", cls)
		}
		do(t, ctx, "Tab to the cancel/continue forms", chromedp.Focus(`#continue-text`), chromedp.SendKeys(`#continue-text`, "hello"), chromedp.KeyEvent("\t"))
		if tag := get(t, ctx, "focus", chromedp.Evaluate[string](`document.activeElement.textContent`)); !strings.Contains(tag, "Send and watch") {
			t.Errorf("Tab from the continue text reaches %q, want its send button", tag)
		}
		do(t, ctx, "phone size", chromedp.EmulateViewport(390, 844), chromedp.Navigate(h.base+"/members/lead/tasks/"+leadTask), chromedp.WaitVisible(`#task-answer`))
		if w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 392 {
			t.Errorf("at 390 px wide the page is %d px wide: it scrolls sideways", w)
		}
		shot(t, ctx, dir, "task-phone.png")
		do(t, ctx, "formation at phone size", chromedp.Navigate(h.base+"/"), chromedp.WaitVisible(`svg.graph`))
		if w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 392 {
			t.Errorf("at 390 px wide the formation page is %d px wide", w)
		}
		shot(t, ctx, dir, "formation-phone.png")
		do(t, ctx, "back to 1280x800", chromedp.EmulateViewport(1280, 800))
	})

	t.Run("a wrong or missing login gets no data", func(t *testing.T) {
		fresh := ctx
		do(t, fresh, "forget the login", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
			return chromedp.Void{}, err
		})
		for _, p := range []string{"/", "/members/worker", "/members/lead/tasks/" + leadTask, "/login?code=wrong-code"} {
			do(t, fresh, "open "+p+" without a login", chromedp.Navigate(h.base+p), chromedp.WaitVisible(`#token`))
			text := get(t, fresh, "page text", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			for _, secret := range []string{h.urls["lead"], h.urls["worker"], "worker says", "data-member", "csrf"} {
				if strings.Contains(text, secret) {
					t.Errorf("%s without a login shows %q", p, secret)
				}
			}
		}
		if e := text(t, fresh, "error", `.error`); !strings.Contains(e, "not valid") {
			t.Errorf("a wrong code says %q", e)
		}
		status := get(t, fresh, "events without login", chromedp.Evaluate[int](`fetch('/events').then(r => r.status)`, chromedp.EvalAwaitPromise))
		if status != http.StatusUnauthorized {
			t.Errorf("the event stream without a login answers %d, want 401", status)
		}
		shot(t, fresh, dir, "login.png")
		do(t, ctx, "log in again", chromedp.Navigate(h.console.LoginURL(h.base)), chromedp.WaitVisible(`tr.member[data-member="lead"]`))
	})

	t.Run("a request from another origin is refused", func(t *testing.T) {
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!doctype html><title>evil</title>
<form id="f" method="post" action="%[1]s/send"><input name="member" value="lead"><input name="text" value="evil form"><input name="csrf" value="guessed"></form>
<script>
fetch(%[1]q + "/send", {method: "POST", credentials: "include", mode: "no-cors",
  headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "member=lead&text=evil+fetch"})
  .finally(() => document.getElementById("f").submit());
</script>`, h.base)
		}))
		defer evil.Close()
		do(t, ctx, "visit a page of another origin that posts to the console", chromedp.Navigate(evil.URL), chromedp.WaitVisible(`#error-detail`))
		if d := text(t, ctx, "refusal", `#error-detail`); !strings.Contains(d, "another origin") || !strings.Contains(d, "nothing was done") {
			t.Errorf("the cross-origin form post shows %q", d)
		}
		shot(t, ctx, dir, "refused.png")
		for _, text := range []string{"evil fetch", "evil form"} {
			if got := h.tasksWithText("lead", text); len(got) != 0 {
				t.Errorf("a request from another origin sent %q to lead: task %s", text, got[0].ID)
			}
		}
	})
}

// TestBrowserApproval: in headless Chromium, a message sent from the page to the approvals example's
// clerk (whose ask-first hook asks before session-status runs) brings its task page to the question, with
// the tool and Approve / Deny; the Approve click runs the tool and the task completes on the page. A
// second task is denied with a reason, which the agent is told.
func TestBrowserApproval(t *testing.T) {
	chromiumPath(t)
	a := startApprovalsFormation(t)
	ctx := newChrome(t)
	dir := shotDir(t)

	ask := func(what string) {
		t.Helper()
		do(t, ctx, "send status to clerk from the formation page",
			chromedp.Navigate(a.base+"/"),
			chromedp.WaitVisible(`tr.member[data-member="clerk"]`),
			chromedp.SetValue(`#send-member`, "clerk"),
			chromedp.SendKeys(`#send-text`, "status"),
			chromedp.Click(`#send-button`),
			chromedp.WaitVisible(`#task-state`),
		)
		poll(t, ctx, what+": the question shown with Approve and Deny",
			`!!document.querySelector('#question') && !!document.querySelector('#approve-button') && !!document.querySelector('#deny-button')`)
		if q := text(t, ctx, "question", `#question`); q != "May clerk read its session status?" {
			t.Errorf("%s: the question reads %q", what, q)
		}
		if tool := text(t, ctx, "tool", `#question-tool`); tool != "session-status" {
			t.Errorf("%s: the tool asked about reads %q", what, tool)
		}
		if body := text(t, ctx, "page", `main`); strings.Contains(body, "not built yet") {
			t.Errorf("%s: the waiting task's page says answering is not built yet:\n%s", what, body)
		}
		if st := get(t, ctx, "state", chromedp.Evaluate[string](`document.querySelector('#task-state').dataset.state`)); st != "input_required" {
			t.Errorf("%s: the waiting task shows state %q", what, st)
		}
	}

	do(t, ctx, "log in", chromedp.Navigate(a.console.LoginURL(a.base)), chromedp.WaitVisible(`tr.member[data-member="clerk"]`))
	ask("approve")
	page := get(t, ctx, "location", chromedp.Location())
	shot(t, ctx, dir, "approval.png")
	submit(t, ctx, "approve", `#approve-button`)
	poll(t, ctx, "the approved task completes on its page", `document.querySelector('#task-state').dataset.state === 'completed' && !!document.querySelector('#task-answer')`)
	if loc := get(t, ctx, "location", chromedp.Location()); loc != page {
		t.Errorf("after approving, the browser is at %s, want the task's page %s", loc, page)
	}
	if ans := strings.TrimSpace(text(t, ctx, "answer", `#task-answer`)); !strings.HasPrefix(ans, "ok: {") {
		t.Errorf("the approved task answered %q, want the tool's result", ans)
	}
	if q := get(t, ctx, "question gone", chromedp.Evaluate[bool](`!!document.querySelector('#answer-form')`)); q {
		t.Errorf("the completed task still shows the answer form")
	}
	shot(t, ctx, dir, "approved.png")

	ask("deny")
	do(t, ctx, "give a reason", chromedp.SendKeys(`#answer-reason`, "not now"))
	submit(t, ctx, "deny", `#deny-button`)
	poll(t, ctx, "the denied task ends on its page", `document.querySelector('#task-state').dataset.state === 'completed' && !!document.querySelector('#task-answer')`)
	if ans := text(t, ctx, "answer", `#task-answer`); !strings.Contains(ans, "denied by the task's sender") || !strings.Contains(ans, "not now") {
		t.Errorf("the denied task answered %q, want the refusal with the reason", ans)
	}
}

// submit clicks a form's button and waits until the page it leads to has loaded.
func submit(t *testing.T, ctx context.Context, what, button string) {
	t.Helper()
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__before = true`))
	do(t, ctx, what, chromedp.Click(button))
	for deadline := time.Now().Add(80 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		loaded, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`!window.__before && document.readyState === 'complete' && !!document.querySelector('#task-state')`))
		cancel()
		if err == nil && loaded {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the next page did not load (%v)", what, err)
		}
	}
}
