package console

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// sendAsk sends "ask worker: 2 + 3" to lead's door directly (not through the console), returning at once,
// and waits until lead has called worker (worker's task exists; a gated worker holds it).
func (h *hello) sendAsk() a2a.TaskID {
	h.t.Helper()
	res, err := h.client("lead").SendMessage(context.Background(), &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: "m-ask", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("ask worker: 2 + 3")}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil || res.Task == nil {
		h.t.Fatalf("send to lead: %v", err)
	}
	waitFor(h.t, "lead's call to reach worker", func() bool { return len(h.tasksWithText("worker", "2 + 3")) == 1 })
	return res.Task.ID
}

func (m *memberWatch) pollCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.polls
}

func (m *memberWatch) stateOf(id a2a.TaskID) a2a.TaskState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.tasks[string(id)]; r != nil {
		return r.State
	}
	return ""
}

// openEvents opens the console's event stream as a page does and returns a function that closes it.
func openEvents(t *testing.T, b *browser) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", b.base+"/events", nil)
	res, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(res.Body).ReadString('\n'); !strings.HasPrefix(line, "retry:") {
		t.Fatalf("the event stream began with %q", line)
	}
	return func() {
		cancel()
		res.Body.Close()
	}
}

// Once the console has found a task, the task's changes reach it through the door's SubscribeToTask
// stream, not through the polls: with a console that polls once an hour, lead's and worker's tasks still
// complete in its lists, and no poll ran meanwhile. Each stream ends with its task.
func TestLiveTasksFollowTheDoorsStreams(t *testing.T) {
	h := startHello(t, true)
	lead := h.sendAsk()
	worker := h.tasksWithText("worker", "2 + 3")[0].ID
	c, base := startConsoleWith(t, h.r, h.urls, h.records, time.Hour)
	b := newBrowser(t, base)
	b.login(c)
	defer openEvents(t, b)() // opening a page reads the doors once, at once
	lw, ww := c.byName["lead"], c.byName["worker"]
	waitFor(t, "the console to follow lead's and worker's live tasks", func() bool {
		return lw.followsOf() == 1 && ww.followsOf() == 1
	})
	if st := lw.stateOf(lead); st.Terminal() || st == "" {
		t.Fatalf("lead's task is %q in the console before worker was released", st)
	}
	polls := lw.pollCount() + ww.pollCount()
	h.release()
	waitFor(t, "lead's and worker's tasks completed in the console", func() bool {
		return lw.stateOf(lead) == a2a.TaskStateCompleted && ww.stateOf(worker) == a2a.TaskStateCompleted
	})
	if n := lw.pollCount() + ww.pollCount(); n != polls {
		t.Errorf("%d polls ran while the tasks finished: their ends should have come from the streams", n-polls)
	}
	waitFor(t, "the streams to end with their tasks", func() bool { return lw.followsOf() == 0 && ww.followsOf() == 0 })
	_, body := b.get("/members/lead")
	if !strings.Contains(body, string(lead)) || !strings.Contains(body, `data-state="completed"`) {
		t.Errorf("lead's page does not list its task completed:\n%s", body)
	}
}

// proxy forwards loopback connections to a door until it is cut, which closes every connection at
// once, as a door that went down mid-stream does.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool // cut has run: a connection accepted since is closed at once
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				in.Close()
				out.Close()
				return
			}
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(out, in); out.Close() })
			p.wg.Go(func() { io.Copy(in, out); in.Close() })
		}
	})
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A door that goes down while the console streams one of its tasks: the stream's goroutine ends, the
// member is shown down, and the rest of the console goes on (lead's task still completes live). TestMain's
// goleak check then finds nothing left of the stream.
func TestADoorThatGoesDownMidStream(t *testing.T) {
	h := startHello(t, true)
	p := startProxy(t, strings.TrimPrefix(h.urls["worker"], "http://"))
	lead := h.sendAsk()
	urls := map[string]string{"lead": h.urls["lead"], "worker": p.url()}
	c, base := startConsoleFor(t, h.r, urls, h.records)
	b := newBrowser(t, base)
	b.login(c)
	defer openEvents(t, b)()
	ww := c.byName["worker"]
	waitFor(t, "the console to follow worker's task through the proxy", func() bool { return ww.followsOf() == 1 })
	p.cut()
	waitFor(t, "worker's stream to end and worker shown down", func() bool {
		_, body := b.get("/")
		return ww.followsOf() == 0 && strings.Contains(body, `<tr class="member" data-member="worker">`) &&
			strings.Contains(body, `ms-down">down`)
	})
	h.release()
	waitFor(t, "lead's task completed in the console while worker is down", func() bool {
		return c.byName["lead"].stateOf(lead) == a2a.TaskStateCompleted
	})
	if n := ww.followsOf(); n != 0 {
		t.Errorf("%d streams to the door that is down", n)
	}
}

// A door that takes the stream's request and then sends nothing, not even its keep-alives: the console
// gives up on the stream after streamIdle, and its goroutine ends.
func TestASilentStreamIsClosed(t *testing.T) {
	old := streamIdle
	streamIdle = 300 * time.Millisecond
	defer func() { streamIdle = old }()
	h := startHello(t, false)
	// A door that answers ListTasks with one working task and then holds every stream without a byte.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	var streams sync.WaitGroup
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"SubscribeToTask"`) {
			streams.Add(1)
			defer streams.Done()
			select {
			case <-r.Context().Done():
			case <-held:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"id":"tsk_01silent","contextId":"ctx_01silent","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-01-01T00:00:00Z"}}],"nextPageToken":"","pageSize":1,"totalSize":1}}`)
	})}
	go srv.Serve(ln)
	defer func() {
		close(held)
		srv.Close()
		streams.Wait()
	}()
	urls := map[string]string{"lead": h.urls["lead"], "worker": "http://" + ln.Addr().String()}
	c, base := startConsoleFor(t, h.r, urls, h.records)
	b := newBrowser(t, base)
	b.login(c)
	defer openEvents(t, b)()
	ww := c.byName["worker"]
	waitFor(t, "the console to stream the silent door's task", func() bool { return ww.followsOf() == 1 })
	waitFor(t, "the silent stream to be closed", func() bool {
		ww.mu.Lock()
		defer ww.mu.Unlock()
		return len(ww.following) == 0 && !ww.refollow["tsk_01silent"].IsZero()
	})
}
