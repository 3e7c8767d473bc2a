package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/push"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/roster"
)

const (
	testOperatorToken  = "op-token-for-tests"
	testFormationToken = "formation-token-for-tests"
)

// gatedScript is a script capsule whose tasks finish only once the test creates the file "go" in the
// capsule directory (or "fail" to make them fail), so a test controls when work ends without sleeping.
const gatedScript = `name: gated
script:
  command: [sh, -c, 'read -r line; while [ ! -e "$MUR_CAPSULE_DIR/go" ] && [ ! -e "$MUR_CAPSULE_DIR/fail" ]; do sleep 0.01; done; if [ -e "$MUR_CAPSULE_DIR/fail" ]; then echo "it broke: $line" >&2; exit 7; fi; echo "done: $line"']
`

type fixture struct {
	t       testing.TB
	dir     string // the capsule directory
	url     string // the door's base URL
	session *member.Session
	store   *store.Store
	srv     *httptest.Server
	door    *Door
	hub     *events.Hub
}

// files maps capsule-relative paths to contents; murmur.yaml is required.
func startDoor(t testing.TB, files map[string]string) *fixture {
	t.Helper()
	return startDoorBuffer(t, files, 0)
}

// startDoorBuffer is startDoor with a stream buffer of its own (events per subscriber; 0: the default).
// Its streams wait for a stalled client for minutes, not seconds: a test decides when a client reads.
func startDoorBuffer(t testing.TB, files map[string]string, buffer int) *fixture {
	t.Helper()
	return startDoorWith(t, files, doorOptions{buffer: buffer})
}

// doorOptions are what startDoorWith may change in the fixture's door.
type doorOptions struct {
	buffer int // events per stream subscriber; 0: the default
	// pushAllow, when not nil, gives the door push notification configs, with this webhook allowlist.
	pushAllow []string
	// maxStreams is how many streams one caller may hold open; 0: the default.
	maxStreams int
	// wasmCache is the compilation cache of WebAssembly modules the session loads from ("": none).
	wasmCache string
	// getenv is the session's environment; nil: the process's, but for the global artifact store, an
	// empty directory of the test's.
	getenv func(string) string
	// tracerProvider is what the door's and the session's spans start on; nil: the global provider.
	tracerProvider trace.TracerProvider
}

// startDoorWith is startDoor with options.
func startDoorWith(t testing.TB, files map[string]string, opts doorOptions) *fixture {
	t.Helper()
	buffer := opts.buffer
	root := t.TempDir()
	dir := filepath.Join(root, "capsule")
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, err := capsule.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	storePath := filepath.Join(root, "data", "tasks.db")
	st, err := store.OpenWith(storePath, store.Config{Retention: c.Store.Retention})
	if err != nil {
		t.Fatal(err)
	}
	var configs PushConfigs
	var notifier *push.Notifier
	if opts.pushAllow != nil {
		allow, err := push.NewAllowlist(opts.pushAllow)
		if err != nil {
			t.Fatal(err)
		}
		if notifier, err = push.Open(push.Config{Path: storePath, Allow: allow, Settle: st.Settle}); err != nil {
			t.Fatal(err)
		}
		configs = notifier
	}
	reg, wrapped := NewRegistry("solo")
	series, err := metrics.New(wrapped)
	if err != nil {
		t.Fatal(err)
	}
	hub := events.New(events.Config{Buffer: buffer})
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String()
	getenv := opts.getenv
	if getenv == nil {
		global := filepath.Join(root, "global-store")
		getenv = func(k string) string {
			if k == "MUR_STORE_DIR" {
				return global
			}
			return os.Getenv(k)
		}
	}
	sess, err := member.Start(member.Config{
		Member: "solo", Formation: "test", Capsule: c, Store: st,
		RecordsRoot: filepath.Join(root, "records"), WorkDir: filepath.Join(root, "work"), Metrics: series,
		Events: hub, DoorURL: url, ArtifactsDir: filepath.Join(root, "data", "artifacts"),
		WasmCacheDir: opts.wasmCache, Getenv: getenv, TracerProvider: opts.tracerProvider,
	})
	if err != nil {
		t.Fatal(err)
	}
	ros := testRoster(t, root)
	f := &fixture{t: t, dir: dir, session: sess, store: st, hub: hub}
	f.srv, f.url = srv, url
	door, err := NewDoor(DoorConfig{
		Member: "solo", Roster: ros, Executor: sess,
		Tokens:   Tokens{Operator: testOperatorToken, Formation: testFormationToken},
		Card:     NewCard("solo", c.Description, "test", f.url, "test"),
		MaxBody:  64 << 10,
		Gatherer: reg, Registerer: wrapped, Events: hub, StreamWriteTimeout: 10 * time.Minute,
		AnswersMessage: c.AnswersWithMessage(), Push: configs, MaxStreams: opts.maxStreams,
		TracerProvider: opts.tracerProvider,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.door = door
	f.srv.Config.Handler = door
	f.srv.Start()
	t.Cleanup(func() {
		door.CloseStreams()
		f.release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sess.Close(ctx); err != nil {
			t.Errorf("session close: %v", err)
		}
		f.srv.Close()
		if notifier != nil {
			if err := notifier.Close(); err != nil {
				t.Errorf("push notifier close: %v", err)
			}
		}
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return f
}

// testRoster is a roster in which "caller" and "other" may reach "solo" and "stranger" may not.
func testRoster(t testing.TB, root string) *roster.Roster {
	t.Helper()
	for _, n := range []string{"solo", "caller", "other", "stranger"} {
		d := filepath.Join(root, "roster", n)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "murmur.yaml"), []byte("name: "+n+"\nscript: {command: [cat]}\n"), 0o644)
	}
	path := filepath.Join(root, "roster", "roster.yaml")
	body := "formation: test\nmembers:\n  - {name: solo, capsule: ./solo}\n  - {name: caller, capsule: ./caller}\n  - {name: other, capsule: ./other}\n  - {name: stranger, capsule: ./stranger}\nreach:\n  - {from: caller, to: [solo]}\n  - {from: other, to: [solo]}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := roster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// release lets every gated task finish.
func (f *fixture) release() { os.WriteFile(filepath.Join(f.dir, "go"), nil, 0o644) }

// failGated makes every gated task fail.
func (f *fixture) failGated() { os.WriteFile(filepath.Join(f.dir, "fail"), nil, 0o644) }

// bearer is an http.RoundTripper that adds a bearer token, the way a user configures a2a-go's client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// client returns the independent A2A client (a2a-go v2.3.1) talking to the door with token.
func (f *fixture) client(token string) *a2aclient.Client {
	f.t.Helper()
	tr := &http.Transport{}
	f.t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: token, base: tr}, Timeout: 30 * time.Second}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2ago.AgentInterface{a2ago.NewAgentInterface(f.url+"/a2a", a2ago.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Destroy() })
	return c
}

func userMessage(text string) *a2ago.Message {
	return a2ago.NewMessage(a2ago.MessageRoleUser, a2ago.NewTextPart(text))
}

// waitState polls GetTask until the task is in state want.
func (f *fixture) waitState(c *a2aclient.Client, id a2ago.TaskID, want a2ago.TaskState) *a2ago.Task {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := c.GetTask(context.Background(), &a2ago.GetTaskRequest{ID: id})
		if err != nil {
			f.t.Fatalf("GetTask %s: %v", id, err)
		}
		if task.Status.State == want {
			return task
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("task %s is %s, never reached %s", id, task.Status.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func statusText(t *a2ago.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	var parts []string
	for _, p := range t.Status.Message.Parts {
		parts = append(parts, p.Text())
	}
	return strings.Join(parts, "\n")
}

func responseText(t *a2ago.Task) string {
	for _, a := range t.Artifacts {
		if a.Name == "response" {
			var parts []string
			for _, p := range a.Parts {
				parts = append(parts, p.Text())
			}
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

func nilLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
