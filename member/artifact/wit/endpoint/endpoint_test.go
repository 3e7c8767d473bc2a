package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Host that records its calls and answers fixed bytes.
type recorder struct {
	mu     sync.Mutex
	calls  []call
	answer []byte
}

type call struct {
	fn  string
	req string
}

func (r *recorder) Call(_ context.Context, fn string, request []byte) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{fn, string(request)})
	return r.answer
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) last() call {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return call{}
	}
	return r.calls[len(r.calls)-1]
}

// hostFunc is a Host of one function.
type hostFunc func(ctx context.Context, fn string, request []byte) []byte

func (f hostFunc) Call(ctx context.Context, fn string, request []byte) []byte {
	return f(ctx, fn, request)
}

// open opens an endpoint in a fresh directory, closed when the test ends.
func open(t *testing.T, ctx context.Context, h Host) *Endpoint {
	t.Helper()
	e, err := Open(ctx, t.TempDir(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// env returns the value of the variable name in e.Env().
func env(t *testing.T, e *Endpoint, name string) string {
	t.Helper()
	for _, kv := range e.Env() {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	t.Fatalf("%s is not in %q", name, e.Env())
	return ""
}

// client returns an http.Client that dials the endpoint's socket, as named in its Env.
func client(t *testing.T, e *Endpoint) *http.Client {
	t.Helper()
	sock := env(t, e, EnvSocket)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

type reply struct {
	status int
	ctype  string
	body   string
}

// do sends method path with body and the Authorization header auth (none when empty).
func do(t *testing.T, c *http.Client, method, path, auth string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, "http://murmur"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

func bearer(t *testing.T, e *Endpoint) string { return "Bearer " + env(t, e, EnvKey) }

// refusal returns the error of a JSON error answer, failing when the body is not one.
func refusal(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error == nil {
		t.Fatalf("the answer %q is not a JSON error", body)
	}
	return *v.Error
}

func TestEnv(t *testing.T) {
	e := open(t, context.Background(), &recorder{})
	sock, token := env(t, e, EnvSocket), env(t, e, EnvKey)
	if !filepath.IsAbs(sock) || sock != e.Socket() {
		t.Errorf("%s=%q, want the absolute socket path %q", EnvSocket, sock, e.Socket())
	}
	if len(token) != 64 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Errorf("%s=%q, want 32 bytes in hex", EnvKey, token)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("stat %s: %v, %v; want a socket", sock, fi, err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket's mode is %v, want 0600", fi.Mode().Perm())
	}
	other := open(t, context.Background(), &recorder{})
	if env(t, other, EnvKey) == token || other.Socket() == sock {
		t.Errorf("two endpoints share a token or a socket: %q, %q", e.Env(), other.Env())
	}
}

func TestRoundTrip(t *testing.T) {
	h := &recorder{answer: []byte(`{"text":"hi","usage":{"input":1,"output":2}}`)}
	e := open(t, context.Background(), h)
	c := client(t, e)
	for _, tc := range []struct{ path, fn, body string }{
		{"/run_inference", wit.FnRunInference, `{"messages":[{"role":"user","text":"x"}]}`},
		{"/manage_pull", wit.FnManagePull, `{"artifact":"local/tool-edit"}`},
	} {
		r := do(t, c, http.MethodPost, tc.path, bearer(t, e), []byte(tc.body))
		if r.status != http.StatusOK || r.ctype != "application/json" || r.body != string(h.answer) {
			t.Errorf("POST %s: %d %q %q, want 200 application/json %q", tc.path, r.status, r.ctype, r.body, h.answer)
		}
		last := h.last()
		if last.fn != tc.fn || last.req != tc.body {
			t.Errorf("POST %s: the Host got %q %q, want %q %q", tc.path, last.fn, last.req, tc.fn, tc.body)
		}
	}
	if h.n() != 2 {
		t.Errorf("the Host was called %d times, want 2", h.n())
	}
}

func TestFunctions(t *testing.T) {
	var got wit.InferenceRequest
	f := wit.Functions{Infer: func(_ context.Context, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
		got = req
		return wit.InferenceAnswer{Text: "answered: " + req.Messages[0].Text, Usage: wit.Usage{Input: 3, Output: 4}}, nil
	}}
	e := open(t, context.Background(), f)
	c := client(t, e)

	r := do(t, c, http.MethodPost, "/run_inference", bearer(t, e), []byte(`{"messages":[{"role":"user","text":"ping"}],"max_output_tokens":7}`))
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %q", r.status, r.body)
	}
	var ans wit.InferenceAnswer
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil {
		t.Fatalf("the answer %q: %v", r.body, err)
	}
	if ans.Text != "answered: ping" || ans.Usage != (wit.Usage{Input: 3, Output: 4}) || got.MaxOutputTokens != 7 {
		t.Errorf("answer %+v, request %+v", ans, got)
	}

	r = do(t, c, http.MethodPost, "/run_inference", bearer(t, e), []byte(`{"messages":[]}`))
	if msg := refusal(t, r.body); r.status != http.StatusOK || !strings.HasPrefix(msg, "bad-request: ") {
		t.Errorf("an empty request: %d %q, want 200 and a bad-request: refusal", r.status, msg)
	}
	r = do(t, c, http.MethodPost, "/manage_pull", bearer(t, e), []byte(`{"artifact":"local/x"}`))
	if msg := refusal(t, r.body); r.status != http.StatusOK || !strings.HasPrefix(msg, "not-granted: ") {
		t.Errorf("manage_pull of a hook: %d %q, want 200 and a not-granted: refusal", r.status, msg)
	}
}

func TestToken(t *testing.T) {
	h := &recorder{answer: []byte(`{}`)}
	e := open(t, context.Background(), h)
	c := client(t, e)
	other := open(t, context.Background(), h)
	token := env(t, e, EnvKey)
	body := []byte(`{"messages":[{"role":"user","text":"x"}]}`)
	for _, auth := range []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer " + token[:63],
		"Bearer " + token + "0",
		"Basic " + token,
		token,
		"bearer " + strings.ToUpper(token),
		bearer(t, other),
	} {
		r := do(t, c, http.MethodPost, "/run_inference", auth, body)
		msg := refusal(t, r.body)
		if r.status != http.StatusUnauthorized || !strings.HasPrefix(msg, "not-granted: ") ||
			!strings.Contains(msg, "Authorization: Bearer") || !strings.Contains(msg, EnvKey) {
			t.Errorf("Authorization %q: %d %q, want 401 not-granted: naming the header and %s", auth, r.status, msg, EnvKey)
		}
	}
	if h.n() != 0 {
		t.Errorf("the Host was called %d times without the token", h.n())
	}
	if r := do(t, c, http.MethodPost, "/run_inference", bearer(t, e), body); r.status != http.StatusOK || h.n() != 1 {
		t.Errorf("with the token: %d, %d calls", r.status, h.n())
	}
}

func TestPathAndMethod(t *testing.T) {
	h := &recorder{answer: []byte(`{}`)}
	e := open(t, context.Background(), h)
	c := client(t, e)
	for _, p := range []string{"/", "/run_inference/", "/manage-pull", "/answer", "/RUN_INFERENCE"} {
		r := do(t, c, http.MethodPost, p, bearer(t, e), []byte(`{}`))
		msg := refusal(t, r.body)
		if r.status != http.StatusNotFound || !strings.Contains(msg, "/run_inference") || !strings.Contains(msg, "/manage_pull") {
			t.Errorf("POST %s: %d %q, want 404 naming the two paths", p, r.status, msg)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		r := do(t, c, m, "/run_inference", bearer(t, e), nil)
		msg := refusal(t, r.body)
		if r.status != http.StatusMethodNotAllowed || !strings.Contains(msg, "POST") {
			t.Errorf("%s /run_inference: %d %q, want 405 saying POST", m, r.status, msg)
		}
	}
	if h.n() != 0 {
		t.Errorf("the Host was called %d times", h.n())
	}
}

func TestTooLarge(t *testing.T) {
	h := &recorder{answer: []byte(`{}`)}
	e := open(t, context.Background(), h)
	c := client(t, e)
	for _, chunked := range []bool{false, true} {
		big := bytes.Repeat([]byte("x"), wit.MaxRequest+1)
		req, err := http.NewRequest(http.MethodPost, "http://murmur/run_inference", bytes.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		if chunked {
			// Hide the length: the server learns it only by reading.
			req.Body = io.NopCloser(bytes.NewReader(big))
			req.ContentLength = -1
		}
		req.Header.Set("Authorization", bearer(t, e))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		msg := refusal(t, string(b))
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.HasPrefix(msg, "bad-request: ") || !strings.Contains(msg, "1048576") {
			t.Errorf("chunked %v: %d %q, want 413 bad-request: saying the limit", chunked, resp.StatusCode, msg)
		}
	}
	if h.n() != 0 {
		t.Errorf("the Host was called %d times", h.n())
	}
	// Exactly the limit is a request.
	if r := do(t, c, http.MethodPost, "/run_inference", bearer(t, e), bytes.Repeat([]byte(" "), wit.MaxRequest)); r.status != http.StatusOK || h.n() != 1 {
		t.Errorf("a request of %d bytes: %d, %d calls", wit.MaxRequest, r.status, h.n())
	}
}

// blocking is a Host that signals its call started and waits for its ctx to end.
type blocking struct {
	started chan struct{}
	ended   chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 1), ended: make(chan error, 1)}
}

func (b *blocking) Call(ctx context.Context, _ string, _ []byte) []byte {
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.ended <- ctx.Err()
	case <-time.After(20 * time.Second):
		b.ended <- errors.New("the call's context did not end")
	}
	return []byte(`{"error":"failed: cancelled"}`)
}

// inflight starts one call of e in the background.
func inflight(t *testing.T, e *Endpoint) {
	t.Helper()
	c := client(t, e)
	req, err := http.NewRequest(http.MethodPost, "http://murmur/run_inference", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer(t, e))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() { <-done })
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestRunContextEndsCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newBlocking()
	e := open(t, ctx, h)
	inflight(t, e)
	wait(t, h.started, "the call")
	cancel()
	select {
	case err := <-h.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the call ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the run's context did not end the call's")
	}
}

func TestCloseEndsCall(t *testing.T) {
	h := newBlocking()
	e := open(t, context.Background(), h)
	inflight(t, e)
	wait(t, h.started, "the call")
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-h.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the call ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Close returned before the call it ended returned")
	}
	if d := time.Since(start); d > CloseWait {
		t.Errorf("Close took %v", d)
	}
}

func TestCloseBounded(t *testing.T) {
	old := closeWait
	closeWait = 300 * time.Millisecond
	defer func() { closeWait = old }()

	release := make(chan struct{})
	started := make(chan struct{})
	returned := make(chan struct{})
	h := hostFunc(func(context.Context, string, []byte) []byte {
		close(started)
		<-release // ignores its ctx
		close(returned)
		return []byte(`{}`)
	})
	e := open(t, context.Background(), h)
	inflight(t, e)
	wait(t, started, "the call")
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	var err error
	select {
	case err = <-closed:
	case <-time.After(closeWait + 5*time.Second):
		close(release)
		<-closed
		t.Fatal("Close waited on a Host ignoring its context past its bound")
	}
	d := time.Since(start)
	close(release)
	wait(t, returned, "the Host's return")
	if d < closeWait || d > closeWait+5*time.Second {
		t.Errorf("Close took %v with a Host ignoring its context, want about %v", d, closeWait)
	}
	if err == nil || !strings.Contains(err.Error(), "still runs") {
		t.Errorf("Close: %v, want an error saying a call was left behind", err)
	}
	if _, err := os.Stat(e.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after Close: %v, want it gone", err)
	}
}

func TestClose(t *testing.T) {
	h := &recorder{answer: []byte(`{}`)}
	e := open(t, context.Background(), h)
	c := client(t, e)
	sock := e.Socket()
	if r := do(t, c, http.MethodPost, "/run_inference", bearer(t, e), []byte(`{}`)); r.status != http.StatusOK {
		t.Fatalf("before Close: %d", r.status)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after Close: %v, want it gone", err)
	}
	if conn, err := net.Dial("unix", sock); err == nil {
		conn.Close()
		t.Error("dialling the socket after Close succeeded")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://murmur/run_inference", strings.NewReader(`{}`))
	req.Header.Set("Authorization", bearer(t, e))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a call after Close got %d", resp.StatusCode)
	}
	if h.n() != 1 {
		t.Errorf("the Host was called %d times, want 1", h.n())
	}
	// The handler itself refuses once closed, whatever connection reaches it.
	rec := &recordWriter{header: http.Header{}}
	r, _ := http.NewRequest(http.MethodPost, "http://murmur/run_inference", strings.NewReader(`{}`))
	r.Header.Set("Authorization", bearer(t, e))
	e.serve(rec, r)
	if rec.status != http.StatusUnauthorized || h.n() != 1 {
		t.Errorf("the handler after Close: %d, %d calls", rec.status, h.n())
	}
}

// recordWriter is a minimal http.ResponseWriter.
type recordWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recordWriter) Header() http.Header { return w.header }
func (w *recordWriter) WriteHeader(s int)   { w.status = s }
func (w *recordWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

func TestLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 110))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), dir, &recorder{})
	if err == nil {
		e.Close()
		t.Fatal("Open in a directory too deep for a socket path succeeded")
	}
	if !strings.Contains(err.Error(), "107") || !strings.Contains(err.Error(), "shorter directory") {
		t.Errorf("the error %q does not say the limit", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Open left %d files behind", len(ents))
	}
}

func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not on PATH: the documented curl line is not tried")
	}
	f := wit.Functions{Infer: func(_ context.Context, req wit.InferenceRequest) (wit.InferenceAnswer, error) {
		return wit.InferenceAnswer{Text: "curl said " + req.Messages[0].Text, Usage: wit.Usage{Input: 1, Output: 1}}, nil
	}}
	e := open(t, context.Background(), f)
	// The line of the package documentation, with "…" filled in.
	line := `curl -s --unix-socket "$MUR_HOST_SOCKET" -H "Authorization: Bearer $MUR_HOST_KEY" -d '{"messages":[{"role":"user","text":"hello"}]}' http://murmur/run_inference`
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append([]string{"PATH=" + filepath.Dir(curl)}, e.Env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	var ans wit.InferenceAnswer
	if err := json.Unmarshal(out, &ans); err != nil || ans.Text != "curl said hello" {
		t.Errorf("curl printed %q (%v), want the answer to hello", out, err)
	}
}
