// Package endpoint is how a command hook reaches the WIT level 2 functions (DESIGN §18, package
// member/artifact/wit): an HTTP endpoint on a Unix socket, opened for one run of the hook and closed
// when the run ends.
//
// A Unix socket rather than a loopback TCP port, because a hook without network runs in a network
// namespace where no host port is reachable; a socket reached by its path needs nothing else opened.
//
// The run is given two environment variables:
//
//   - MUR_HOST_SOCKET, the absolute path of the socket;
//   - MUR_HOST_KEY, a random token good for this run only, sent as "Authorization: Bearer <token>" (not
//     named MUR_…TOKEN…: a variable of that name never reaches a program the runtime starts, see
//     sandbox.DropSecrets).
//
// Two endpoints answer, each a POST whose body is the request's JSON (at most wit.MaxRequest bytes):
//
//   - POST /run_inference: {"messages": [{"role": "user", "text": "…"}], "max_output_tokens": 200};
//   - POST /manage_pull: {"artifact": "scope/name[@version]"}.
//
// The answer is 200 with the function's JSON, or its refusal {"error": "<token>: <text>"}, exactly as
// wit.Functions.Call writes it. The endpoint itself answers a JSON error with another status: 401
// (not-granted:) for a missing or wrong token, 404 for another path, 405 for another method, 413 for
// a body over the limit. A shell hook asks for one inference call with:
//
//	curl -s --unix-socket "$MUR_HOST_SOCKET" -H "Authorization: Bearer $MUR_HOST_KEY" -d '{"messages":[{"role":"user","text":"…"}]}' http://murmur/run_inference
//
// (the host name in the URL is not looked at). The calls' context ends when the run's does (its time
// limit, the task's cancel) or when the endpoint is closed; after Close the socket file is gone and the
// token works nowhere.
package endpoint

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// The environment variables a command hook's run is given (see Endpoint.Env).
const (
	EnvSocket = "MUR_HOST_SOCKET"
	EnvKey    = "MUR_HOST_KEY"
)

// The paths the endpoint serves, one per function.
const (
	PathManagePull   = "/" + wit.FnManagePull
	PathRunInference = "/" + wit.FnRunInference
)

// MaxSocketPath is the longest socket path, in bytes: a Unix socket address holds 108 bytes with the
// terminating NUL.
const MaxSocketPath = 107

// CloseWait bounds how long Close waits for calls in flight once their context has ended: a Host that
// ignores its context does not hang Close longer.
const CloseWait = 5 * time.Second

// closeWait is CloseWait, shortened by tests.
var closeWait = CloseWait

// Host answers one call; wit.Functions is one. The answer is JSON, a refusal included.
type Host interface {
	Call(ctx context.Context, fn string, request []byte) []byte
}

// Endpoint is one run's endpoint, open from Open to Close.
type Endpoint struct {
	path  string
	token string
	want  []byte // "Bearer <token>"
	host  Host

	srv    *http.Server
	cancel context.CancelFunc
	served chan struct{} // closed when Serve returned

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open listens on a new Unix socket in dir (which must exist) and serves h there, with a fresh token,
// until Close. ctx is the hook run's context: when it ends, so do the calls in flight and any made
// later (Close is still needed to stop serving).
func Open(ctx context.Context, dir string, h Host) (*Endpoint, error) {
	if h == nil {
		return nil, errors.New("endpoint: no Host to serve")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("endpoint: the socket directory %s: %w", dir, err)
	}
	name, err := random(6)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(abs, "mur-"+name+".sock")
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("endpoint: the socket path %s is %d bytes, more than the %d a Unix socket address holds; choose a shorter directory than %s", path, len(path), MaxSocketPath, abs)
	}
	token, err := random(32)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("endpoint: listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("endpoint: restricting %s to its owner: %w", path, err)
	}
	base, cancel := context.WithCancel(ctx)
	e := &Endpoint{
		path:   path,
		token:  token,
		want:   []byte("Bearer " + token),
		host:   h,
		cancel: cancel,
		served: make(chan struct{}),
	}
	e.srv = &http.Server{
		Handler:           http.HandlerFunc(e.serve),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(e.served)
		_ = e.srv.Serve(ln)
	}()
	return e, nil
}

// random returns n random bytes in hex.
func random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("endpoint: reading random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Env returns the run's environment variables: MUR_HOST_SOCKET=<absolute socket path> and
// MUR_HOST_KEY=<token>.
func (e *Endpoint) Env() []string {
	return []string{EnvSocket + "=" + e.path, EnvKey + "=" + e.token}
}

// Socket returns the socket's absolute path (the file a confinement must let the hook connect to).
func (e *Endpoint) Socket() string { return e.path }

// Close stops serving: it stops accepting, ends the context of the calls in flight, waits for them at
// most CloseWait, and removes the socket file. After Close the token works nowhere. It may be called
// more than once; the later calls return the first one's error.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.cancel()
		var errs []error
		if err := e.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("endpoint: closing %s: %w", e.path, err))
		}
		<-e.served
		done := make(chan struct{})
		go func() {
			e.calls.Wait()
			close(done)
		}()
		timer := time.NewTimer(closeWait)
		select {
		case <-done:
			timer.Stop()
		case <-timer.C:
			errs = append(errs, fmt.Errorf("endpoint: a call on %s still runs %v after its context ended; left behind", e.path, closeWait))
		}
		if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("endpoint: removing the socket: %w", err))
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// enter counts a call in, unless the endpoint is closed.
func (e *Endpoint) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.calls.Add(1)
	return true
}

func (e *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	var fn string
	switch r.URL.Path {
	case PathManagePull:
		fn = wit.FnManagePull
	case PathRunInference:
		fn = wit.FnRunInference
	default:
		fail(w, http.StatusNotFound, wit.TokenBadRequest, fmt.Sprintf("%s is not an endpoint of this run; POST to %s or %s", r.URL.Path, PathRunInference, PathManagePull))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, wit.TokenBadRequest, fmt.Sprintf("%s takes POST, not %s, with the request's JSON as the body", r.URL.Path, r.Method))
		return
	}
	if !e.enter() {
		fail(w, http.StatusUnauthorized, wit.TokenNotGranted, "this run's endpoint is closed; its token works no more")
		return
	}
	defer e.calls.Done()
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), e.want) != 1 {
		fail(w, http.StatusUnauthorized, wit.TokenNotGranted, "send the header \"Authorization: Bearer $"+EnvKey+"\", with the token in "+EnvKey+" of this run")
		return
	}
	tooLong := fmt.Sprintf("the request is more than the %d bytes a request may be", wit.MaxRequest)
	if r.ContentLength > wit.MaxRequest {
		fail(w, http.StatusRequestEntityTooLarge, wit.TokenBadRequest, tooLong)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wit.MaxRequest))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			fail(w, http.StatusRequestEntityTooLarge, wit.TokenBadRequest, tooLong)
			return
		}
		fail(w, http.StatusBadRequest, wit.TokenBadRequest, "reading the request: "+err.Error())
		return
	}
	answer := e.host.Call(r.Context(), fn, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
}

// fail answers status with the JSON error "<token>: <text>".
func fail(w http.ResponseWriter, status int, token, text string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{wit.Refuse(token, text).Text})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
