package console

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The console must work in current Firefox as well as Chromium. chromedp speaks only Chrome's DevTools
// protocol, so this test drives Firefox over WebDriver BiDi (the W3C protocol Firefox serves itself with
// --remote-debugging-port): a few JSON commands over one WebSocket, no driver binary.

// firefoxPath finds a Firefox to drive: MUR_FIREFOX, else the usual names on PATH. Without one the test is
// skipped with one line saying so (.ci/run installs Debian's firefox-esr).
func firefoxPath(t *testing.T) string {
	if p := os.Getenv("MUR_FIREFOX"); p != "" {
		return p
	}
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no firefox binary found (install Debian's firefox-esr package, as .ci/run does, or set MUR_FIREFOX): the console's Firefox test is skipped")
	return ""
}

// bidi is one WebDriver BiDi session with one browsing context (the tab).
type bidi struct {
	t    *testing.T
	conn *websocket.Conn
	next int
	tab  string
}

var bidiListening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// newFirefox starts a headless Firefox with a fresh profile, opens a BiDi session and finds its tab. The
// browser and the connection end with the test.
func newFirefox(t *testing.T) *bidi {
	path := firefoxPath(t)
	cmd := exec.Command(path, "--headless", "--no-remote", "--remote-debugging-port=0", "--profile", t.TempDir(), "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	exited := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := bidiListening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // Firefox and its content processes
		<-exited
	})
	var ws string
	select {
	case ws = <-found:
	case <-exited:
		t.Fatalf("%s exited before it served WebDriver BiDi", path)
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not say where it serves WebDriver BiDi within 90 s", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, ws+"/session", nil)
	if err != nil {
		t.Fatalf("connecting to Firefox's WebDriver BiDi at %s: %v", ws, err)
	}
	conn.SetReadLimit(64 << 20) // screenshots
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	b := &bidi{t: t, conn: conn}
	b.call("session.new", map[string]any{"capabilities": map[string]any{}}, nil)
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	b.call("browsingContext.getTree", map[string]any{}, &tree)
	if len(tree.Contexts) == 0 {
		t.Fatal("Firefox has no browsing context")
	}
	b.tab = tree.Contexts[0].Context
	b.viewport(1280, 800)
	return b
}

// call sends one command and waits for its answer, skipping the events in between; an error answer
// fails the test.
func (b *bidi) call(method string, params any, out any) {
	b.t.Helper()
	if err := b.callErr(method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

// callErr is call that returns the browser's error answer instead of failing the test: for a command
// that may meet a page being replaced. A broken connection still fails the test.
func (b *bidi) callErr(method string, params any, out any) error {
	b.t.Helper()
	b.next++
	id := b.next
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err := b.conn.Write(ctx, websocket.MessageText, cmd); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		_, data, err := b.conn.Read(ctx)
		if err != nil {
			b.t.Fatalf("%s: reading its answer: %v", method, err)
		}
		var msg struct {
			ID      *int            `json:"id"`
			Type    string          `json:"type"`
			Result  json.RawMessage `json:"result"`
			Error   string          `json:"error"`
			Message string          `json:"message"`
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			b.t.Fatalf("%s: an answer that is not JSON: %v", method, err)
		}
		if msg.ID == nil || *msg.ID != id {
			continue // an event, or an answer to nothing we wait for
		}
		if msg.Type == "error" {
			return fmt.Errorf("%s: %s: %s", method, msg.Error, msg.Message)
		}
		if out != nil {
			if err := json.Unmarshal(msg.Result, out); err != nil {
				b.t.Fatalf("%s: %v: %s", method, err, msg.Result)
			}
		}
		return nil
	}
}

func (b *bidi) navigate(url string) {
	b.t.Helper()
	b.call("browsingContext.navigate", map[string]any{"context": b.tab, "url": url, "wait": "complete"}, nil)
}

func (b *bidi) viewport(w, h int) {
	b.t.Helper()
	b.call("browsingContext.setViewport", map[string]any{"context": b.tab, "viewport": map[string]int{"width": w, "height": h}}, nil)
}

// eval runs a JavaScript expression in the tab (awaiting a promise) and returns its value; a thrown
// exception fails the test.
func (b *bidi) eval(expr string) any {
	b.t.Helper()
	var res struct {
		Type   string `json:"type"`
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call("script.evaluate", map[string]any{"expression": expr, "target": map[string]any{"context": b.tab},
		"awaitPromise": true, "resultOwnership": "none"}, &res)
	if res.Type == "exception" {
		b.t.Fatalf("evaluating %s: %s", expr, res.ExceptionDetails.Text)
	}
	return res.Result.Value
}

func (b *bidi) text(sel string) string {
	b.t.Helper()
	s, _ := b.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)).(string)
	return s
}

// poll waits until a JavaScript expression is true in the tab (bounded only against a hung test).
func (b *bidi) poll(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(80 * time.Second)
	for b.eval("!!("+expr+")") != true {
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: still not so after 80 s (%s)", what, expr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// key presses and releases one key in the tab, as a user at the keyboard would.
func (b *bidi) key(k string) {
	b.t.Helper()
	b.call("input.performActions", map[string]any{"context": b.tab, "actions": []any{map[string]any{
		"type": "key", "id": "keyboard", "actions": []any{
			map[string]string{"type": "keyDown", "value": k}, map[string]string{"type": "keyUp", "value": k}},
	}}}, nil)
}

func (b *bidi) shot(dir, name string) {
	b.t.Helper()
	var res struct {
		Data string `json:"data"`
	}
	b.call("browsingContext.captureScreenshot", map[string]any{"context": b.tab}, &res)
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestFirefox walks the console's main path in Firefox: log in, the formation page with its graph, send
// a message from the page and watch the task complete live with the member call linked, the task page,
// the keyboard, and a phone-sized screen.
func TestFirefox(t *testing.T) {
	firefoxPath(t)
	h := startHello(t, true)
	b := newFirefox(t)
	dir := shotDir(t)

	b.navigate(h.console.LoginURL(h.base))
	b.poll("the formation page lists both members and draws both nodes",
		`document.querySelector('tr.member[data-member="lead"]') && document.querySelector('tr.member[data-member="worker"]') &&
		 document.querySelector('svg.graph g.node[data-member="lead"]') && document.querySelector('svg.graph g.node[data-member="worker"]')`)
	if n := b.eval(`document.querySelectorAll('svg.graph line.edge[data-from="lead"][data-to="worker"]').length`); n != float64(1) {
		t.Errorf("the graph draws %v lead→worker edges in Firefox, want 1", n)
	}
	b.poll("the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
	b.shot(dir, "firefox-formation.png")

	b.eval(`document.querySelector('#send-member').value = 'lead';
		document.querySelector('#send-text').value = 'ask worker: 2 + 3';
		document.querySelector('#send-button').click()`)
	b.poll("the browser is on lead's new task page", `/\/members\/lead\/tasks\/tsk_[a-z0-9]+$/.test(location.pathname) && document.querySelector('#task-state')`)
	b.poll("worker's call shown in flight", `document.querySelector('a.callee')`)
	if st := b.eval(`document.querySelector('#task-state').dataset.state`); st == "completed" {
		t.Fatalf("lead's task is %v while worker is still held", st)
	}
	b.poll("the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
	b.eval(`window.__sameLoad = true`)
	h.release()
	b.poll("lead's task completes on the same page, without a reload",
		`document.querySelector('#task-state').dataset.state === 'completed' && window.__sameLoad === true`)
	b.poll("the answer shown", `document.querySelector('#task-answer')`)
	if a := strings.TrimSpace(b.text(`#task-answer`)); a != "worker says: 5" {
		t.Errorf("answer %q in Firefox, want %q", a, "worker says: 5")
	}
	workers := h.tasksWithText("worker", "2 + 3")
	if len(workers) != 1 {
		t.Fatalf("worker has %d tasks for 2 + 3, want 1", len(workers))
	}
	if href := b.eval(`document.querySelector('a.callee').getAttribute('href')`); href != "/members/worker/tasks/"+string(workers[0].ID) {
		t.Errorf("the member call links to %v, want worker's task %s", href, workers[0].ID)
	}
	task := b.eval(`location.href`).(string)
	b.shot(dir, "firefox-task.png")

	b.navigate(task)
	b.poll("the task page loaded", `document.querySelector('#task-answer')`)
	b.key("\uE004") // Tab
	if cls := b.eval(`document.activeElement.className`); cls != "skip" {
		t.Errorf("in Firefox the first Tab focuses %q, want the skip link", cls)
	}

	b.viewport(390, 844)
	b.navigate(task)
	b.poll("the task page at phone size", `document.querySelector('#task-answer')`)
	if w, _ := b.eval(`document.documentElement.scrollWidth`).(float64); w > 392 {
		t.Errorf("at 390 px wide the task page is %v px wide in Firefox: it scrolls sideways", w)
	}
	b.shot(dir, "firefox-task-phone.png")
}

// pollLoad waits until a JavaScript expression is true in the tab while a page may be loading: an
// evaluation that meets the page being replaced, or throws, counts as not yet.
func (b *bidi) pollLoad(what, expr string) {
	b.t.Helper()
	for deadline := time.Now().Add(80 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var res struct {
			Type   string `json:"type"`
			Result struct {
				Value any `json:"value"`
			} `json:"result"`
		}
		err := b.callErr("script.evaluate", map[string]any{"expression": "!!(" + expr + ")", "target": map[string]any{"context": b.tab},
			"awaitPromise": true, "resultOwnership": "none"}, &res)
		if err == nil && res.Type == "success" && res.Result.Value == true {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: still not so after 80 s (%s; last error %v)", what, expr, err)
		}
	}
}

// TestFirefoxApproval walks the approval in Firefox as TestBrowserApproval does in Chromium: a message
// to the approvals example's clerk brings its task page to the question with Approve and Deny; Approve
// runs the tool and the task completes on its page; a second task is denied with a reason, which the
// agent is told.
func TestFirefoxApproval(t *testing.T) {
	firefoxPath(t)
	a := startApprovalsFormation(t)
	b := newFirefox(t)
	dir := shotDir(t)

	ask := func(what string) {
		t.Helper()
		b.navigate(a.base + "/")
		b.poll(what+": the formation page lists clerk", `document.querySelector('tr.member[data-member="clerk"]')`)
		b.eval(`window.__before = true;
			document.querySelector('#send-member').value = 'clerk';
			document.querySelector('#send-text').value = 'status';
			document.querySelector('#send-button').click()`)
		b.pollLoad(what+": the question shown with Approve and Deny",
			`!window.__before && document.querySelector('#question') && document.querySelector('#approve-button') && document.querySelector('#deny-button')`)
		if q := b.text(`#question`); q != "May clerk read its session status?" {
			t.Errorf("%s: the question reads %q in Firefox", what, q)
		}
		if tool := b.text(`#question-tool`); tool != "session-status" {
			t.Errorf("%s: the tool asked about reads %q in Firefox", what, tool)
		}
		if st := b.eval(`document.querySelector('#task-state').dataset.state`); st != "input_required" {
			t.Errorf("%s: the waiting task shows state %v in Firefox", what, st)
		}
	}
	// submit fills the form and clicks in one evaluation, so that no live update of the page can come
	// between the two.
	submit := func(what, fill, button string) {
		t.Helper()
		b.eval(fill + `; window.__before = true; document.querySelector(` + fmt.Sprintf("%q", button) + `).click()`)
		b.pollLoad(what+": the task page after the answer", `!window.__before && document.readyState === 'complete' && document.querySelector('#task-state')`)
	}

	b.navigate(a.console.LoginURL(a.base))
	b.poll("logged in", `document.querySelector('tr.member[data-member="clerk"]')`)
	ask("approve")
	page := b.eval(`location.href`)
	b.shot(dir, "firefox-approval.png")
	submit("approve", "", "#approve-button")
	b.pollLoad("the approved task completes on its page", `document.querySelector('#task-state').dataset.state === 'completed' && document.querySelector('#task-answer')`)
	if loc := b.eval(`location.href`); loc != page {
		t.Errorf("after approving, Firefox is at %v, want the task's page %v", loc, page)
	}
	if ans := strings.TrimSpace(b.text(`#task-answer`)); !strings.HasPrefix(ans, "ok: {") {
		t.Errorf("the approved task answered %q in Firefox, want the tool's result", ans)
	}
	b.shot(dir, "firefox-approved.png")

	ask("deny")
	submit("deny", `document.querySelector('#answer-reason').value = 'not now'`, "#deny-button")
	b.pollLoad("the denied task ends on its page", `document.querySelector('#task-state').dataset.state === 'completed' && document.querySelector('#task-answer')`)
	if ans := b.text(`#task-answer`); !strings.Contains(ans, "denied by the task's sender") || !strings.Contains(ans, "not now") {
		t.Errorf("the denied task answered %q in Firefox, want the refusal with the reason", ans)
	}
}
