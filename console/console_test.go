package console

import (
	"bufio"
	"context"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
)

func TestLoginCodeWorksOnceAndSetsAStrictCookie(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)

	// No login: the login page, and nothing of the formation.
	for _, p := range []string{"/", "/members/worker", "/members/lead/tasks/tsk_x"} {
		code, body := b.get(p)
		if code != http.StatusUnauthorized || !strings.Contains(body, "Operator token") || strings.Contains(body, "data-member") || strings.Contains(body, h.urls["worker"]) {
			t.Errorf("GET %s without login: %d, want 401 and the login page with no member or door shown:\n%s", p, code, body)
		}
	}
	if code, body, _ := b.do("GET", "/events", nil, nil); code != http.StatusUnauthorized || strings.Contains(body, "event:") {
		t.Errorf("GET /events without login: %d %q, want 401 and no events", code, body)
	}
	// A wrong code: refused, no cookie.
	code, body, hdr := b.do("GET", "/login?code=not-the-code", nil, nil)
	if code != http.StatusUnauthorized || hdr.Get("Set-Cookie") != "" || !strings.Contains(body, "not valid") {
		t.Errorf("wrong code: %d, Set-Cookie %q, body %q", code, hdr.Get("Set-Cookie"), body)
	}
	u, _ := url.Parse(h.console.LoginURL(h.base))
	code, _, hdr = b.do("GET", u.RequestURI(), nil, nil)
	ck := hdr.Get("Set-Cookie")
	if code != http.StatusOK || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Fatalf("login: %d, Set-Cookie %q: want HttpOnly and SameSite=Strict", code, ck)
	}
	if code, body := b.get("/"); code != http.StatusOK || !strings.Contains(body, `data-member="worker"`) {
		t.Errorf("formation page after login: %d\n%s", code, body)
	}
	// The code is spent: a second browser cannot use it.
	b2 := newBrowser(t, h.base)
	if code, _, hdr := b2.do("GET", u.RequestURI(), nil, nil); code != http.StatusUnauthorized || hdr.Get("Set-Cookie") != "" {
		t.Errorf("the code worked twice: %d %q", code, hdr.Get("Set-Cookie"))
	}
	// The operator token logs in through the form; a wrong token does not.
	if code, _, hdr := b2.do("POST", "/login", url.Values{"token": {"wrong"}, "next": {"/"}}, nil); code != http.StatusUnauthorized || hdr.Get("Set-Cookie") != "" {
		t.Errorf("wrong token logged in: %d", code)
	}
	if code, _, hdr := b2.do("POST", "/login", url.Values{"token": {testOperatorToken}, "next": {"//evil.example/"}}, nil); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		t.Errorf("token login: %d to %q, want 303 to / (never to another host)", code, hdr.Get("Location"))
	}
	if code, _ := b2.get("/"); code != http.StatusOK {
		t.Errorf("after token login: %d", code)
	}
}

func TestStateChangesNeedTheCSRFTokenAndTheOwnOrigin(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)
	csrf := b.login(h.console)
	form := func(text string, withCSRF bool) url.Values {
		v := url.Values{"member": {"lead"}, "text": {text}}
		if withCSRF {
			v.Set("csrf", csrf)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		text   string
		csrf   bool
		header map[string]string
		want   int
		says   string
	}{
		{"no csrf token", "hello without csrf", false, nil, http.StatusForbidden, "anti-CSRF"},
		{"other origin", "hello from elsewhere", true, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "another origin"},
		{"same site, other port", "hello from a sibling", true, map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden, "another origin"},
		{"cross-site form post", "hello by form", true, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, http.StatusForbidden, "another origin"},
	} {
		code, body, _ := b.do("POST", "/send", form(tc.text, tc.csrf), tc.header)
		if code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", tc.name, code, tc.want, tc.says, body)
		}
		if got := h.tasksWithText("lead", tc.text); len(got) != 0 {
			t.Errorf("%s: the refused request still sent a task: %v", tc.name, got[0].ID)
		}
	}
	// A read from another origin is refused too.
	if code, _, _ := b.do("GET", "/events", nil, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("events from another origin: %d, want 403", code)
	}
	if code, _, _ := b.do("GET", "/", nil, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}); code != http.StatusForbidden {
		t.Errorf("a cross-site fetch of the formation page: %d, want 403", code)
	}
	// The same request from the console's own page goes through.
	code, _, hdr := b.do("POST", "/send", form("hello", true), map[string]string{"Origin": h.base, "Sec-Fetch-Site": "same-origin"})
	if code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/members/lead/tasks/tsk_") {
		t.Fatalf("send from the console: %d to %q", code, hdr.Get("Location"))
	}
	waitFor(t, "the sent task at lead", func() bool { return len(h.tasksWithText("lead", "hello")) == 1 })
}

func TestBadInputGetsAClearPage(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)
	csrf := b.login(h.console)
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/members/lead/tasks/tsk_01nosuchtask", http.StatusNotFound, "Member lead has no task tsk_01nosuchtask"},
		{"/tasks/tsk_01nosuchtask", http.StatusNotFound, "No member of hello knows a task tsk_01nosuchtask"},
		{"/members/nobody", http.StatusNotFound, `has no member "nobody"; its members are lead, worker`},
		{"/members/lead/tasks/" + url.PathEscape("<script>"), http.StatusBadRequest, "is not a task id"},
		{"/members/lead?state=sleeping", http.StatusBadRequest, `"sleeping" is not a task state`},
		{"/nowhere", http.StatusNotFound, "no page at /nowhere"},
	} {
		code, body := b.get(tc.path)
		if code != tc.code || !strings.Contains(html.UnescapeString(body), tc.says) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", tc.path, code, tc.code, tc.says, body)
		}
		if strings.Contains(body, "goroutine") || strings.Contains(body, "<script>") {
			t.Errorf("GET %s shows a stack trace or unescaped input:\n%s", tc.path, body)
		}
	}
	for _, tc := range []struct {
		form url.Values
		says string
	}{
		{url.Values{"member": {"nobody"}, "text": {"hi"}}, `no member "nobody"`},
		{url.Values{"member": {"lead"}, "text": {"  "}}, "the message is empty"},
	} {
		tc.form.Set("csrf", csrf)
		if code, body, _ := b.do("POST", "/send", tc.form, nil); code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), tc.says) {
			t.Errorf("send %v: %d, want 400 with %q:\n%s", tc.form, code, tc.says, body)
		}
	}
	// Canceling a task that already completed: the door's refusal, said plainly.
	done := h.send("lead", "hello")
	code, body, _ := b.do("POST", "/cancel", url.Values{"csrf": {csrf}, "member": {"lead"}, "task": {string(done.ID)}}, nil)
	if code != http.StatusConflict || !strings.Contains(body, "refused to cancel") {
		t.Errorf("cancel a completed task: %d\n%s", code, body)
	}
}

func TestAMemberThatIsDownIsShownDown(t *testing.T) {
	h := startHello(t, false)
	// A third member whose door is not listening: a port that was free a moment ago.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	os.MkdirAll(filepath.Join(h.root, "ghost"), 0o755)
	os.WriteFile(filepath.Join(h.root, "ghost", "murmur.yaml"), []byte("name: ghost\nscript: {command: [cat]}\n"), 0o644)
	text, _ := os.ReadFile(filepath.Join(h.root, "roster.yaml"))
	rosterText := strings.Replace(string(text), "reach:", "  - name: ghost\n    capsule: ./ghost\n    listen: "+strings.TrimPrefix(dead, "http://")+"\nreach:", 1)
	path := filepath.Join(h.root, "roster3.yaml")
	os.WriteFile(path, []byte(rosterText), 0o644)
	r, err := roster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{"lead": h.urls["lead"], "worker": h.urls["worker"], "ghost": dead}
	c, base := startConsoleFor(t, r, urls, h.records)
	b := newBrowser(t, base)
	b.login(c)
	h.send("lead", "hello")
	waitFor(t, "ghost shown down while lead shows its task", func() bool {
		_, body := b.get("/")
		return strings.Contains(body, `<tr class="member" data-member="ghost">`) &&
			strings.Contains(body, `ms-down">down`) && strings.Contains(body, "unreachable") &&
			strings.Contains(body, `data-state="completed"`)
	})
	code, body := b.get("/members/ghost")
	if code != http.StatusOK || !strings.Contains(body, "down") || !strings.Contains(body, "unreachable") {
		t.Errorf("ghost's page: %d\n%s", code, body)
	}
	code, body = b.get("/members/ghost/tasks/tsk_01abc")
	if code != http.StatusOK || !strings.Contains(body, `id="door-error"`) || !strings.Contains(body, "unreachable") {
		t.Errorf("a task page of a member that is down: %d\n%s", code, body)
	}
}

func TestRecordsCutMidLineAreNamed(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)
	b.login(h.console)
	task := h.send("lead", "hello")
	// A session whose trace.jsonl was cut mid-line by a crash, then written on by nobody.
	dir := filepath.Join(h.records, "ses_01crashed")
	os.MkdirAll(dir, 0o700)
	id := "tsk_01cutmidline"
	lines := `{"type":"session_start","session":"ses_01crashed","member":"lead","formation":"hello","ts":"2026-01-01T00:00:00Z"}
{"type":"task_start","session":"ses_01crashed","task":"` + id + `","ts":"2026-01-01T00:00:01Z"}
{"type":"inference","session":"ses_01crashed","task":"` + id + `","turn":1,"driver":"local","ts":"2026-01-01T00:00:02Z"}
{"type":"tool_call","session":"ses_01crashed","task":"` + id + `","tool":"session-st
{"type":"tool_call","session":"ses_01crashed","task":"` + id + `","tool":"session-status","status":"ok","call_id":"c1","ts":"2026-01-01T00:00:03Z"}
{"type":"task_end","session":"ses_01cr`
	os.WriteFile(filepath.Join(dir, "trace.jsonl"), []byte(lines), 0o600)
	var body string
	waitFor(t, "the cut records on the task page", func() bool {
		var code int
		code, body = b.get("/members/lead/tasks/" + id)
		return code == http.StatusOK && strings.Contains(body, `id="records-damage"`)
	})
	for _, want := range []string{"line 4 is not a complete JSON record", "line 6 is not finished", `data-tool="session-status"`, "Turn 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page of cut records lacks %q:\n%s", want, body)
		}
	}
	// The rest of the console still works: the real task's page.
	if code, body := b.get("/members/lead/tasks/" + string(task.ID)); code != http.StatusOK || !strings.Contains(body, "Hello from lead") {
		t.Errorf("a good task's page next to cut records: %d", code)
	}
}

// A browser that goes away in the middle of the event stream leaves no handler behind.
func TestEventStreamEndsWhenTheBrowserGoesAway(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)
	b.login(h.console)
	before := h.console.hub.count()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/events", nil)
	res, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(res.Body)
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "retry:") {
		t.Fatalf("the stream began with %q", line)
	}
	h.send("lead", "hello") // events flow while the browser reads
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: change") {
			break
		}
	}
	if n := h.console.hub.count(); n != before+1 {
		t.Fatalf("%d streams open, want %d", n, before+1)
	}
	cancel() // the browser goes away mid-stream
	res.Body.Close()
	waitFor(t, "the stream's handler to end", func() bool { return h.console.hub.count() == before })
	// TestMain's goleak check covers the rest once the console and the formation are shut down.
}

func TestCancelAndContinueFromTheConsole(t *testing.T) {
	h := startHello(t, true) // worker holds its tasks, so lead's task is still running when canceled
	b := newBrowser(t, h.base)
	csrf := b.login(h.console)
	code, _, hdr := b.do("POST", "/send", url.Values{"csrf": {csrf}, "member": {"lead"}, "text": {"ask worker: 2 + 3"}}, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("send: %d", code)
	}
	page := hdr.Get("Location")
	id := page[strings.LastIndex(page, "/")+1:]
	waitFor(t, "worker's task to start", func() bool { return len(h.tasksWithText("worker", "2 + 3")) == 1 })
	_, body := b.get(page)
	if !strings.Contains(body, `id="cancel-form"`) {
		t.Fatalf("a running task's page has no cancel form:\n%s", body)
	}
	code, _, hdr = b.do("POST", "/cancel", url.Values{"csrf": {csrf}, "member": {"lead"}, "task": {id}}, nil)
	if code != http.StatusSeeOther || hdr.Get("Location") != page {
		t.Fatalf("cancel: %d to %q", code, hdr.Get("Location"))
	}
	waitFor(t, "lead's task canceled, shown on its page", func() bool {
		_, body := b.get(page)
		return strings.Contains(body, `data-state="canceled"`) && !strings.Contains(body, `id="cancel-form"`)
	})
	h.release()

	// Continue the canceled task's context: a new task in the same context.
	task, err := h.client("lead").GetTask(context.Background(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil {
		t.Fatal(err)
	}
	code, _, hdr = b.do("POST", "/send", url.Values{"csrf": {csrf}, "member": {"lead"}, "text": {"hello again"}, "context": {task.ContextID}}, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("continue: %d", code)
	}
	next := h.tasksWithText("lead", "hello again")
	if len(next) != 1 || next[0].ContextID != task.ContextID || string(next[0].ID) == id {
		t.Fatalf("the continuation is %+v, want a new task in context %s", next, task.ContextID)
	}
}

// A task the door no longer knows is still shown from its records: tool calls with input and fenced
// result when the record has them, background commands with their log's tail, the deadline notice, the
// no-answer reason.
func TestTaskPageFromRecordsOnly(t *testing.T) {
	h := startHello(t, false)
	b := newBrowser(t, h.base)
	b.login(h.console)
	dir := filepath.Join(h.records, "ses_01fromrecords")
	os.MkdirAll(filepath.Join(dir, "logs"), 0o700)
	os.WriteFile(filepath.Join(dir, "logs", "wrk_0a1b2c.log"), []byte(strings.Repeat("x", 5000)+"\nbuild finished: 3 warnings\n"), 0o600)
	id := "tsk_01fromrecords"
	rec := func(typ, extra string) string {
		return `{"type":"` + typ + `","session":"ses_01fromrecords","task":"` + id + `","ts":"2026-01-01T00:00:01.5Z"` + extra + "}\n"
	}
	lines := `{"type":"session_start","session":"ses_01fromrecords","member":"lead","formation":"hello","ts":"2026-01-01T00:00:00Z"}` + "\n" +
		rec("task_start", "") +
		rec("inference", `,"turn":1,"driver":"gpt","model":"gpt-4.1-mini","tokens":{"input":1200,"output":80}`) +
		rec("tool_call", `,"call_id":"c1","tool":"make","status":"ok","duration_ms":1500,"input":"{\"args\":[\"all\"]}","result":"<untrusted-content source=tool:make>\nwork_id: wrk_0a1b2c\n</untrusted-content>"`) +
		rec("background_command", `,"operation":"wait","work_id":"wrk_0a1b2c","state":"exited","exit_code":0`) +
		rec("deadline_notice", `,"at":"2026-01-01T00:10:00Z","left_secs":120`) +
		rec("task_end", `,"state":"TASK_STATE_COMPLETED","exit_status":"no_answer","reason":"the build needs a license key I do not have"`)
	os.WriteFile(filepath.Join(dir, "trace.jsonl"), []byte(lines), 0o600)
	var body string
	waitFor(t, "the task page from the records", func() bool {
		var code int
		code, body = b.get("/members/lead/tasks/" + id)
		return code == http.StatusOK && strings.Contains(body, "Turn 1")
	})
	body = html.UnescapeString(body)
	for _, want := range []string{
		`id="door-error"`, "door does not know this task", // the door does not know it; the records do
		"driver <code>gpt</code>", "1200 in, 80 out",
		`data-tool="make"`, `{"args":["all"]}`, "<untrusted-content source=tool:make>",
		"wrk_0a1b2c", "exit 0", "build finished: 3 warnings", "the last 4096 of 5028 bytes",
		"deadline notice", "120 s left",
		`id="task-noanswer"`, "the build needs a license key I do not have",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page lacks %q:\n%s", want, body)
		}
	}
}
