package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"
	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/sourcegraph/jsonrpc2"
	"go.uber.org/goleak"
)

// queuedGated is gatedScript taking tasks into a queue while one runs, so a peer's task waits,
// SUBMITTED, to be streamed.
var queuedGated = strings.Replace(gatedScript, "\n", "\ntask_acceptance: queue\nqueue_size: 10\n", 1)

// closingClient is a2a-go's client for the door with a connection per request, so nothing of a request
// that has ended stays open to be counted as a leak.
func closingClient(t *testing.T, url, token string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token, base: &http.Transport{DisableKeepAlives: true}}}
	c, err := a2aclient.NewFromEndpoints(context.Background(),
		[]*a2ago.AgentInterface{a2ago.NewAgentInterface(url+"/a2a", a2ago.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// openStream subscribes to task id and reads its first event. On success close ends the stream, as a
// client that goes away does.
func openStream(c *a2aclient.Client, id a2ago.TaskID) (close func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	next, stop := iter.Pull2(c.SubscribeToTask(ctx, &a2ago.SubscribeToTaskRequest{ID: id}))
	close = func() { cancel(); stop() }
	ev, err, ok := next()
	if err == nil && !ok {
		err = errors.New("the stream ended without an event")
	}
	if err == nil && !strings.HasPrefix(describe(ev), "task TASK_STATE_") {
		err = errors.New("the stream's first event is " + describe(ev) + ", not the task")
	}
	if err != nil {
		close()
		return nil, err
	}
	return close, nil
}

// tooMany reports whether err is the door's refusal of a stream past its caller's limit.
func tooMany(err error) bool {
	return errors.Is(err, a2ago.ErrServerError) && strings.Contains(err.Error(), "too many open streams")
}

// TestStreamsPerCallerAreCapped: through a real door and a2a-go's client, a peer holds as many streams
// as the limit and no more: the next one, SubscribeToTask or SendStreamingMessage (which then sends no
// task), is refused with a JSON-RPC error giving the limit, the count open and what to do, whichever
// credential (trust class) of the member it comes with. Another peer and the operator each have a limit
// of their own, untouched by it; once the peer closes a stream it may open one again. No goroutine
// outlives the streams.
func TestStreamsPerCallerAreCapped(t *testing.T) {
	const limit = 3
	f := startDoorWith(t, map[string]string{"murmur.yaml": queuedGated}, doorOptions{maxStreams: limit})
	op, caller, other := f.client(testOperatorToken), f.client(peerToken("caller", peercred.Trusted)), f.client(peerToken("other", peercred.Trusted))
	running := sendTask(t, op, "running", true)
	f.waitState(op, running.ID, a2ago.TaskStateWorking)
	mine := sendTask(t, caller, "mine", true)
	theirs := sendTask(t, other, "theirs", true)
	before := goleak.IgnoreCurrent()

	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	open := func(c *a2aclient.Client, id a2ago.TaskID, what string) {
		t.Helper()
		cl, err := openStream(c, id)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		closers = append(closers, cl)
	}
	callerStreams := closingClient(t, f.url, peerToken("caller", peercred.Trusted))
	for range limit {
		open(callerStreams, mine.ID, "a stream of caller's within its limit")
	}

	_, err := openStream(callerStreams, mine.ID)
	if !tooMany(err) {
		t.Fatalf("caller's stream past its limit: %v, want a server error saying too many open streams", err)
	}
	for _, want := range []string{"member caller holds 3 streams open", "--max-streams", "close one of them", "GetTask"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	var ae *a2ago.Error
	if errors.As(err, &ae) {
		want := map[string]string{"limit": "3", "open": "3", "principal": "peer:caller"}
		if diff := cmp.Diff(want, ae.ErrorInfo().Value["metadata"]); diff != "" {
			t.Errorf("the refusal's ErrorInfo metadata (-want +got):\n%s", diff)
		}
	} else {
		t.Errorf("the refusal %v is not an a2a-go error", err)
	}
	// The same member with its other trust class is the same caller.
	if _, err := openStream(closingClient(t, f.url, peerToken("caller", peercred.Untrusted)), mine.ID); !tooMany(err) {
		t.Errorf("caller's untrusted credential past its limit: %v, want too many open streams", err)
	}
	// SendStreamingMessage past the limit is refused before it sends a task.
	_, err = collect(callerStreams.SendStreamingMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("one more")})).rest(t)
	if !tooMany(err) {
		t.Errorf("caller's SendStreamingMessage past its limit: %v, want too many open streams", err)
	}
	if page, err := closingClient(t, f.url, peerToken("caller", peercred.Trusted)).ListTasks(context.Background(), &a2ago.ListTasksRequest{}); err != nil || len(page.Tasks) != 1 {
		t.Errorf("caller's tasks after the refused SendStreamingMessage: %v %v, want only the one it sent before", page, err)
	}
	// The wire error: JSON-RPC's server error, its reason and numbers in ErrorInfo.
	if got := rawStreamError(t, f.url, peerToken("caller", peercred.Trusted), mine.ID); got.Code != a2a.CodeServerError ||
		got.Reason != "TOO_MANY_STREAMS" || got.Metadata["limit"] != "3" || got.Metadata["open"] != "3" {
		t.Errorf("the wire error: %+v, want code %d, reason TOO_MANY_STREAMS, limit 3, open 3", got, a2a.CodeServerError)
	}

	// Another peer and the operator are not held by caller's limit, and the operator has one of its own.
	open(closingClient(t, f.url, peerToken("other", peercred.Trusted)), theirs.ID, "other's stream while caller is at its limit")
	opStreams := closingClient(t, f.url, testOperatorToken)
	for range limit {
		open(opStreams, running.ID, "an operator's stream while caller is at its limit")
	}
	if _, err := openStream(opStreams, running.ID); !tooMany(err) || !strings.Contains(err.Error(), "the operator holds 3 streams open") {
		t.Errorf("the operator's stream past its limit: %v, want too many open streams", err)
	}

	// caller closes one of its streams: it may open one again once the door has seen it go.
	closers[0]()
	closers = closers[1:]
	waitFor(t, func() bool {
		cl, err := openStream(callerStreams, mine.ID)
		if err != nil && !tooMany(err) {
			t.Fatalf("caller's stream after it closed one: %v", err)
		}
		if err == nil {
			closers = append(closers, cl)
		}
		return err == nil
	})

	for _, c := range closers {
		c()
	}
	closers = nil
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after the streams closed: %v", err)
	}
	for _, id := range []a2ago.TaskID{running.ID, mine.ID, theirs.ID} {
		if n := f.hub.Subscribers(a2a.TaskID(id)); n != 0 {
			t.Errorf("task %s has %d subscriptions left after its streams closed", id, n)
		}
	}
}

// rawStreamError sends SubscribeToTask for id with a plain HTTP request and returns the error its one
// event carries, as murmur's a2a package reads it.
func rawStreamError(t *testing.T, url, token string, id a2ago.TaskID) *a2a.Error {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": string(a2a.MethodSubscribeToTask), "params": map[string]any{"id": id}})
	req, _ := http.NewRequest(http.MethodPost, url+"/a2a", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Close = true
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var resp struct {
			Error *jsonrpc2.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &resp); err != nil || resp.Error == nil {
			t.Fatalf("the stream's event %s is not a JSON-RPC error (%v)", data, err)
		}
		return a2a.FromJSONRPC(resp.Error)
	}
	t.Fatalf("HTTP %d and no event", res.StatusCode)
	return nil
}
