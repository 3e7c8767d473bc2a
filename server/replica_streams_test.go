package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/a2a"
)

// sseEvent is one event of a door's stream, read raw: its SSE id and its JSON-RPC result.
type sseEvent struct {
	id     int64 // 0: none
	result a2a.StreamResponse
	raw    string
}

// rawStream opens SubscribeToTask of task id at the door at url, with lastEventID as its Last-Event-ID
// header when not "", and returns its events as they come; the channel closes with the stream.
func rawStream(t *testing.T, url string, id a2ago.TaskID, lastEventID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/a2a",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+string(id)+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: "):
				ev.raw = strings.TrimPrefix(line, "data: ")
				var env struct {
					Result a2a.StreamResponse `json:"result"`
					Error  *json.RawMessage   `json:"error"`
				}
				if err := json.Unmarshal([]byte(ev.raw), &env); err == nil && env.Error == nil {
					ev.result = env.Result
				}
			case line == "" && ev.raw != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// nextEvent is the stream's next event; ok is false once it ended. It fails after 30 s without one.
func nextEvent(t *testing.T, c <-chan sseEvent) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-c:
		return ev, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no stream event in 30 s")
		return sseEvent{}, false
	}
}

// describe is what a test compares of an event: its kind and state or artifact.
func (ev sseEvent) describe() string {
	r := ev.result
	switch {
	case r.Task != nil:
		return "task " + string(r.Task.Status.State)
	case r.StatusUpdate != nil && r.StatusUpdate.Status.Message != nil && r.StatusUpdate.Status.State == a2a.TaskStateWorking:
		return "status " + string(r.StatusUpdate.Status.State) + " " + *r.StatusUpdate.Status.Message.Parts[0].Text
	case r.StatusUpdate != nil:
		return "status " + string(r.StatusUpdate.Status.State)
	case r.ArtifactUpdate != nil:
		return "artifact " + r.ArtifactUpdate.Artifact.Name
	}
	return "unknown " + ev.raw
}

// A stream of a task on a replica that does not run it sends the task as committed and then every event
// the owner's changes made, numbered (SSE id) one after the other, to the terminal statusUpdate; a client
// that comes back on a third replica with the number of the last event it had (Last-Event-ID) gets the
// events after it, each once, the same bytes, and one that had them all gets nothing more.
func TestReplicaStreamsFollowTheOwner(t *testing.T) {
	rs := startReplicas(t, 3, 2*time.Second)
	task := sendTask(t, rs.clients[0], "stream me", true)
	waitState(t, rs.clients[1], task.ID, a2ago.TaskStateWorking)
	owner := rs.owners()[task.ID]
	var others []int // the two replicas that do not run the task
	for i, f := range rs.fs {
		if f.Members[0].Replica != owner {
			others = append(others, i)
		}
	}
	if len(others) != 2 {
		t.Fatalf("task %s is owned by %q; want one of the three replicas", task.ID, owner)
	}
	other, third := others[0], others[1]

	s := rawStream(t, rs.fs[other].Members[0].URL, task.ID, "")
	first, ok := nextEvent(t, s)
	if !ok || first.result.Task == nil || first.result.Task.Status.State != a2a.TaskStateWorking || first.id < 1 {
		t.Fatalf("first event at a replica that does not run the task: %+v; want the working task with its event number", first)
	}
	os.WriteFile(filepath.Join(rs.capsule, "go"), nil, 0o644)
	var evs []sseEvent
	for {
		ev, ok := nextEvent(t, s)
		if !ok {
			break
		}
		evs = append(evs, ev)
	}
	var got []string
	for i, ev := range evs {
		if ev.id != first.id+int64(i)+1 {
			t.Errorf("event %d is numbered %d; want %d (no gap, no repeat)", i, ev.id, first.id+int64(i)+1)
		}
		got = append(got, ev.describe())
	}
	if len(got) < 2 || got[len(got)-1] != "status "+string(a2a.TaskStateCompleted) || !strings.Contains(strings.Join(got, "|"), "artifact response") {
		t.Fatalf("events after the task: %q; want its response artifact and then completed, last", got)
	}

	t.Logf("events from %d: %q", first.id, got)
	// Back on the third replica after the first event after the task: the rest, the same bytes.
	again := rawStream(t, rs.fs[third].Members[0].URL, task.ID, strconv.FormatInt(evs[0].id, 10))
	var rest []sseEvent
	for {
		ev, ok := nextEvent(t, again)
		if !ok {
			break
		}
		rest = append(rest, ev)
	}
	if len(rest) != len(evs)-1 {
		t.Fatalf("resumed after event %d: %d events; want %d", evs[0].id, len(rest), len(evs)-1)
	}
	for i, ev := range rest {
		if ev.id != evs[i+1].id || ev.raw != evs[i+1].raw {
			t.Errorf("resumed event %d: %d %s; want %d %s", i, ev.id, ev.raw, evs[i+1].id, evs[i+1].raw)
		}
	}
	done := rawStream(t, rs.fs[owner0(rs, owner)].Members[0].URL, task.ID, strconv.FormatInt(evs[len(evs)-1].id, 10))
	if ev, ok := nextEvent(t, done); ok {
		t.Errorf("resumed after the last event: %s; want the stream to end", ev.raw)
	}
	bad := rawStream(t, rs.fs[other].Members[0].URL, task.ID, "seven")
	if ev, ok := nextEvent(t, bad); !ok || !strings.Contains(ev.raw, "Last-Event-ID") {
		t.Errorf("a Last-Event-ID that is no number: %+v; want an error naming the header", ev)
	}
}

// owner0 is the index of the replica named owner.
func owner0(rs *replicaSet, owner string) int {
	for i, f := range rs.fs {
		if f.Members[0].Replica == owner {
			return i
		}
	}
	return 0
}

// A door of one process does not number its events: a Last-Event-ID is refused with a clear error, and
// its streams carry no SSE id.
func TestLastEventIDOnOneProcess(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	c := f.client(testOperatorToken)
	task := sendTask(t, c, "one process", true)
	f.waitState(c, task.ID, a2ago.TaskStateWorking)
	s := rawStream(t, f.url, task.ID, "")
	if ev, ok := nextEvent(t, s); !ok || ev.id != 0 || ev.result.Task == nil {
		t.Errorf("first event of one process: %+v; want the task without an id", ev)
	}
	r := rawStream(t, f.url, task.ID, "3")
	if ev, ok := nextEvent(t, r); !ok || !strings.Contains(ev.raw, "does not number its stream events") {
		t.Errorf("Last-Event-ID on one process: %+v; want the refusal", ev)
	}
	f.release()
}
