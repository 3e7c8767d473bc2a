//go:build !offline

package driver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fakeRequest is one request a providerFake saw.
type fakeRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// fakeAnswer is one answer of a providerFake.
type fakeAnswer struct {
	Status      int
	Header      map[string]string
	Fixture     string // a file under the fake's testdata directory
	Body        string // used when Fixture is empty
	ContentType string // application/json unless set
}

// providerFake is a model provider's server on loopback, for a driver's wire format: it records each
// request and plays its answers in order, repeating the last.
type providerFake struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []fakeRequest
	answers []fakeAnswer
}

// newProviderFake starts a fake whose fixtures are under testdata/<dir>.
func newProviderFake(t *testing.T, dir string, answers ...fakeAnswer) *providerFake {
	t.Helper()
	f := &providerFake{answers: answers}
	bodies := map[string][]byte{}
	for _, a := range answers {
		if a.Fixture != "" {
			bodies[a.Fixture] = providerFixture(t, dir, a.Fixture)
		}
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request body: %v", err)
		}
		f.mu.Lock()
		f.seen = append(f.seen, fakeRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		a := f.answers[min(len(f.seen), len(f.answers))-1]
		f.mu.Unlock()
		ct := a.ContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		for k, v := range a.Header {
			w.Header().Set(k, v)
		}
		status := a.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		if a.Fixture != "" {
			_, _ = w.Write(bodies[a.Fixture])
		} else {
			_, _ = io.WriteString(w, a.Body)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *providerFake) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.seen...)
}

func providerFixture(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testEnv is a getenv whose variables a test may change between calls.
type testEnv struct {
	mu   sync.Mutex
	vars map[string]string
}

func (e *testEnv) set(k, v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vars[k] = v
}

func (e *testEnv) getenv(k string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.vars[k]
}
