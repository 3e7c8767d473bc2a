package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
	"go.uber.org/goleak"
)

// Every test that starts a formation or a console must leave no goroutine behind. The test
// PostgreSQL (replicas_test.go) is stopped first, when a test started it: its goroutine ends with it.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const testOperatorToken = "op-token-for-tests"

// testPoll is how often the tests' consoles read; the benchmark uses the default.
var testPoll = 100 * time.Millisecond

// hello is the hello formation of deploy/examples/hello, copied into a temporary directory with its
// doors on port 0, with its console. Worker's tasks wait until release is called, so a test can see
// a call in flight; ungated formations are released at once.
type hello struct {
	t       testing.TB
	root    string
	records string
	gate    string
	f       *server.Formation
	r       *roster.Roster
	urls    map[string]string
	console *Console
	base    string // the console's base URL
}

func startHello(t testing.TB, gated bool) *hello {
	t.Helper()
	root := t.TempDir()
	src := "../deploy/examples/hello"
	for _, rel := range []string{"roster.yaml", "lead/murmur.yaml", "lead/script.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if rel == "roster.yaml" {
			text = strings.NewReplacer("127.0.0.1:7101", "127.0.0.1:0", "127.0.0.1:7102", "127.0.0.1:0").Replace(text)
		}
		if rel == "worker/murmur.yaml" {
			text = strings.Replace(text, "[./answer.sh]", "[./gate.sh]", 1)
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &hello{t: t, root: root, records: filepath.Join(root, "records"), gate: filepath.Join(root, "go")}
	// gate.sh holds a task until the test releases it, then answers as answer.sh does.
	gate := "#!/bin/sh\nwhile [ ! -e '" + h.gate + "' ]; do /bin/sleep 0.05; done\nexec '" + filepath.Join(root, "worker", "answer.sh") + "'\n"
	if err := os.WriteFile(filepath.Join(root, "worker", "gate.sh"), []byte(gate), 0o755); err != nil {
		t.Fatal(err)
	}
	if !gated {
		h.release()
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := server.StartFormation(server.FormationConfig{Roster: r, DataDir: filepath.Join(root, ".murmur"),
		RecordsRoot: h.records, Tokens: server.Tokens{Operator: testOperatorToken, Formation: "formation-token-for-tests"},
		MaxBody: server.DefaultMaxBody, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.f, h.r = f, r
	t.Cleanup(func() {
		h.release()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.Shutdown(ctx); err != nil {
			t.Errorf("formation shutdown: %v", err)
		}
	})
	h.urls = map[string]string{}
	for _, m := range f.Members {
		h.urls[m.Name] = m.URL
	}
	h.console, h.base = startConsoleFor(t, r, h.urls, h.records)
	return h
}

func (h *hello) release() { os.WriteFile(h.gate, nil, 0o644) }

// startConsoleFor serves a console for r with its doors at urls, on a loopback port.
func startConsoleFor(t testing.TB, r *roster.Roster, urls map[string]string, records string) (*Console, string) {
	t.Helper()
	return startConsoleWith(t, r, urls, records, testPoll)
}

// startConsoleWith is startConsoleFor reading the doors every poll.
func startConsoleWith(t testing.TB, r *roster.Roster, urls map[string]string, records string, poll time.Duration) (*Console, string) {
	t.Helper()
	r2, err := r.WithURLs(urls)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Roster: r2, Token: testOperatorToken, RecordsRoot: records, Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console serve: %v", err)
		}
	})
	return c, "http://" + ln.Addr().String()
}

// client returns an a2a client for a member's door with the operator token.
func (h *hello) client(name string) *a2a.Client {
	return a2a.NewClient(h.urls[name]+"/a2a", testOperatorToken, nil)
}

// browser is a cookie-keeping HTTP client for the console, not following redirects.
type browser struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newBrowser(t testing.TB, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw), res.Header
}

func (b *browser) get(path string) (int, string) {
	code, body, _ := b.do("GET", path, nil, nil)
	return code, body
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([^"]+)">`)

// login spends the console's login code and returns the page's anti-CSRF token.
func (b *browser) login(c *Console) string {
	b.t.Helper()
	u, _ := url.Parse(c.LoginURL(b.base))
	if code, body := b.get(u.RequestURI()); code != http.StatusOK {
		b.t.Fatalf("login: %d %s", code, body)
	}
	code, body := b.get("/")
	m := csrfMeta.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		b.t.Fatalf("after login the formation page is %d without a CSRF token:\n%s", code, body)
	}
	return m[1]
}

// waitFor polls cond until it holds, failing after a generous bound (never a timed assertion: the bound
// only stops a hung test).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// tasksWithText returns the tasks of a member whose message is text.
func (h *hello) tasksWithText(member, text string) []a2a.Task {
	size := 100
	res, err := h.client(member).ListTasks(context.Background(), &a2a.ListTasksRequest{PageSize: &size})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []a2a.Task
	for _, t := range res.Tasks {
		for _, m := range t.History {
			if m.Role == a2a.RoleUser && m.Text() == text {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// send sends text to a member directly (not through the console) and waits for its task to end.
func (h *hello) send(member, text string) *a2a.Task {
	h.t.Helper()
	res, err := h.client(member).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Task == nil {
		h.t.Fatal(errors.New("no task"))
	}
	return res.Task
}
