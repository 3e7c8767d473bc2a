package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/murmur-run/murmur/a2a"
	"go.uber.org/goleak"
)

// a2agoClient is the independent A2A client (a2a-go v2.3.1) for the door at baseURL.
func a2agoClient(t testing.TB, baseURL, token string) *a2aclient.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: token, base: tr}}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2ago.AgentInterface{a2ago.NewAgentInterface(baseURL+"/a2a", a2ago.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// describe renders a stream event as one line: "task <state>", "status <state> <text>", "artifact <name>".
func describe(ev a2ago.Event) string {
	msgText := func(m *a2ago.Message) string {
		if m == nil {
			return ""
		}
		var parts []string
		for _, p := range m.Parts {
			parts = append(parts, p.Text())
		}
		return " " + strings.Join(parts, "\n")
	}
	switch e := ev.(type) {
	case *a2ago.Task:
		return fmt.Sprintf("task %s%s", e.Status.State, msgText(e.Status.Message))
	case *a2ago.TaskStatusUpdateEvent:
		return fmt.Sprintf("status %s%s", e.Status.State, msgText(e.Status.Message))
	case *a2ago.TaskArtifactUpdateEvent:
		return "artifact " + e.Artifact.Name
	}
	return fmt.Sprintf("%T", ev)
}

// collector reads a stream on its own goroutine: each event's description goes on lines, the
// stream's end (nil or its error) on done.
type collector struct {
	lines chan string
	done  chan error
}

func collect(seq iter.Seq2[a2ago.Event, error]) *collector {
	c := &collector{lines: make(chan string, 1000), done: make(chan error, 1)}
	go func() {
		for ev, err := range seq {
			if err != nil {
				c.done <- err
				return
			}
			c.lines <- describe(ev)
		}
		c.done <- nil
	}()
	return c
}

// until reads lines until one has prefix, and returns every line read.
func (c *collector) until(t *testing.T, prefix string) []string {
	t.Helper()
	var got []string
	for {
		select {
		case l := <-c.lines:
			got = append(got, l)
			if strings.HasPrefix(l, prefix) {
				return got
			}
		case err := <-c.done:
			t.Fatalf("the stream ended (%v) before %q; it showed %q", err, prefix, got)
		case <-time.After(30 * time.Second):
			t.Fatalf("no %q within 30s; the stream showed %q", prefix, got)
		}
	}
}

// rest reads the lines left once the stream has ended, and its end.
func (c *collector) rest(t *testing.T) ([]string, error) {
	t.Helper()
	var got []string
	for {
		select {
		case l := <-c.lines:
			got = append(got, l)
		case err := <-c.done:
			for {
				select {
				case l := <-c.lines:
					got = append(got, l)
				default:
					return got, err
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the stream did not end within 30s; it showed %q", got)
		}
	}
}

const streamRoster = "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n"

// TestStreamOfATaskThatCallsAMember watches a task that calls another member over real doors with
// a2a-go's client: one subscriber from the start (SendStreamingMessage), a second that connects while
// the task waits for the worker (SubscribeToTask). The late one gets the task as it stands first, then
// exactly the events the first one gets from then on.
func TestStreamOfATaskThatCallsAMember(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":        streamRoster,
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: 'worker says: {{(index .answers 0).output}}'\n",
		"worker/murmur.yaml": gatedWorker,
	}, Tokens{Operator: "op", Formation: "fm"})
	t.Cleanup(fx.release)
	url := fx.f.Members[0].URL
	ctx := context.Background()
	first := collect(a2agoClient(t, url, "op").SendStreamingMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("sum it")}))
	head := first.until(t, "status TASK_STATE_WORKING waiting on call-member: 1 call(s) outstanding")
	if !strings.HasPrefix(head[0], "task TASK_STATE_") {
		t.Fatalf("the stream's first event is %q, want the task", head[0])
	}
	wantHead := []string{"status TASK_STATE_WORKING tool call-member: running", "status TASK_STATE_WORKING tool call-member: ok",
		"status TASK_STATE_WORKING waiting on call-member: 1 call(s) outstanding"}
	if got := head[len(head)-3:]; fmt.Sprint(got) != fmt.Sprint(wantHead) {
		t.Errorf("before the wait the stream showed %q\nwant it to end with %q", head, wantHead)
	}

	page, err := fx.c["lead"].ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 1 {
		t.Fatal(page, err)
	}
	id := a2ago.TaskID(page.Tasks[0].ID)
	late := collect(a2agoClient(t, url, "op").SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: id}))
	if got := late.until(t, "task"); fmt.Sprint(got) != "[task TASK_STATE_WORKING waiting on call-member: 1 call(s) outstanding]" {
		t.Fatalf("the late subscriber's first event is %q, want the task as it stands", got)
	}
	fx.release()
	tail, err := first.rest(t)
	if err != nil {
		t.Fatalf("the first stream ended with %v after %q", err, tail)
	}
	want := []string{"status TASK_STATE_WORKING continuing with 1 member answer(s)", "artifact response",
		"status TASK_STATE_COMPLETED worker says: done: sum it"}
	if fmt.Sprint(tail) != fmt.Sprint(want) {
		t.Errorf("after the worker answered the stream showed %q\nwant %q", tail, want)
	}
	lateTail, err := late.rest(t)
	if err != nil || fmt.Sprint(lateTail) != fmt.Sprint(tail) {
		t.Errorf("the late subscriber got %q (%v), the first %q: subscribers must get the same events", lateTail, err, tail)
	}
	// The task has ended: SubscribeToTask refuses it, with A2A's error.
	_, err = collect(a2agoClient(t, url, "op").SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: id})).rest(t)
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "terminal state") {
		t.Errorf("subscribing to an ended task: %v, want UnsupportedOperation saying it ended", err)
	}
}

func TestStreamErrorsAreStreamEvents(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	c := f.client(testOperatorToken)
	ctx := context.Background()
	_, err := collect(c.SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: "tsk_nope"})).rest(t)
	if !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("SubscribeToTask of an unknown task: %v, want TaskNotFound", err)
	}
	_, err = collect(c.SendStreamingMessage(ctx, &a2ago.SendMessageRequest{Message: a2ago.NewMessage(a2ago.MessageRoleUser)})).rest(t)
	if err == nil || !strings.Contains(err.Error(), "message.parts") {
		t.Errorf("SendStreamingMessage without parts: %v, want invalid params naming message.parts", err)
	}
	// A peer sees only its own tasks, in streams too.
	task := sendTask(t, c, "mine", false)
	peer := f.client(peerToken("caller", "trusted"))
	_, err = collect(peer.SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: task.ID})).rest(t)
	if !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("a peer subscribing to the operator's task: %v, want TaskNotFound", err)
	}
	// A stream of a task that ends at once is its task, ended.
	lines, err := collect(c.SendStreamingMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("quick")})).rest(t)
	if err != nil || len(lines) == 0 || lines[len(lines)-1] != "status TASK_STATE_COMPLETED echo: quick" && lines[len(lines)-1] != "task TASK_STATE_COMPLETED echo: quick" {
		t.Errorf("a quick task's stream: %q, %v; want it to end COMPLETED", lines, err)
	}
	// With the card read, a2a-go knows the door streams (else it falls back to SendMessage).
	resp, err := http.Get(f.url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"streaming":true`) {
		t.Errorf("the card does not declare streaming: %s", body)
	}
}

// TestSlowSubscriberIsDropped: a client that stops reading never holds the task back. The door drops
// its stream once its buffer is full, while the task goes on; the client, reading again, finds the
// events that were buffered and then an error event saying it fell behind.
func TestSlowSubscriberIsDropped(t *testing.T) {
	f := startDoorBuffer(t, map[string]string{"murmur.yaml": gatedScript}, 16)
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "slow", true)
	next, stop := iter.Pull2(c.SubscribeToTask(context.Background(), &a2ago.SubscribeToTaskRequest{ID: task.ID}))
	defer stop()
	ev, err, _ := next()
	if err != nil || !strings.HasPrefix(describe(ev), "task ") {
		t.Fatalf("first event %v, %v", ev, err)
	}
	// The client reads nothing more. The executor's progress (here: big events, many) never waits for it.
	big := strings.Repeat("x", 64<<10)
	n := 0
	for f.hub.Subscribers(a2a.TaskID(task.ID)) > 0 {
		if n++; n > 5000 {
			t.Fatal("5000 events of 64 KiB and the stalled subscriber is still on")
		}
		f.hub.Progress(a2a.TaskID(task.ID), big, nil)
	}
	f.release()
	f.waitState(c, task.ID, a2ago.TaskStateCompleted)
	var last error
	events := 0
	for {
		ev, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			last = err
			break
		}
		if d := describe(ev); strings.HasSuffix(d, "xxx") {
			events++
		} else if !strings.HasPrefix(d, "status TASK_STATE_WORKING") {
			t.Fatalf("event %q, want progress or the task starting to work", d[:min(len(d), 80)])
		}
	}
	if last == nil || !strings.Contains(last.Error(), "fell behind") {
		t.Errorf("after %d buffered events the stream ended with %v, want an error saying it fell behind", events, last)
	}
	if events >= n {
		t.Errorf("the stalled client got all %d events: it was never dropped", n)
	}
	// A new subscription after the drop works as ever: the task has ended, which it says.
	if _, err := collect(c.SubscribeToTask(context.Background(), &a2ago.SubscribeToTaskRequest{ID: task.ID})).rest(t); !errors.Is(err, a2ago.ErrUnsupportedOperation) {
		t.Errorf("resubscribing to the ended task: %v", err)
	}
}

// TestClientDisconnectMidStream: a client that goes away mid-stream leaves no goroutine and no
// subscription behind.
func TestClientDisconnectMidStream(t *testing.T) {
	// The gated script, which says when it has started: its command's goroutines are running by then.
	f := startDoor(t, map[string]string{"murmur.yaml": strings.Replace(gatedScript, "read -r line;", `read -r line; touch "$MUR_CAPSULE_DIR/started";`, 1)})
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "long", true)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(f.dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's command never started")
		}
	}
	before := goleak.IgnoreCurrent()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		next, stop := iter.Pull2(c.SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: task.ID}))
		if ev, err, _ := next(); err != nil || !strings.HasPrefix(describe(ev), "task TASK_STATE_") {
			t.Fatalf("first event %v, %v", ev, err)
		}
		cancel()
		stop()
	}
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after the clients disconnected: %v", err)
	}
	// The door drops a subscription as its handler returns, which goleak may see a moment before.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := f.hub.Subscribers(a2a.TaskID(task.ID))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d subscriptions left 5 s after the clients disconnected", n)
			break
		}
	}
	f.release()
	f.waitState(c, task.ID, a2ago.TaskStateCompleted)
}
