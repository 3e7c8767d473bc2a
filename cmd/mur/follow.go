package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/murmur-run/murmur/a2a"
)

// maxEventBytes bounds one event of a door's stream (the first holds the task with its history).
const maxEventBytes = 64 << 20

// errStreamClosed says a stream ended before the task reached a state its follower stops at.
var errStreamClosed = errors.New("the stream closed before the task ended")

// stream calls a streaming method (SendStreamingMessage, SubscribeToTask) at d and hands each event to
// on until on says it is done (nil), or the stream closes first (errStreamClosed), or fails. An error
// the door answers, as a plain JSON-RPC answer or as the stream's error event, comes back as an
// *a2a.Error.
func (c *conn) stream(ctx context.Context, d door, method a2a.Method, params any, on func(*a2a.StreamResponse) bool) error {
	req := &jsonrpc2.Request{Method: string(method), ID: jsonrpc2.ID{Num: 1}}
	if err := req.SetParams(params); err != nil {
		return err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.client.URL(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set(a2a.HeaderVersion, a2a.ProtocolVersion)
	hreq.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.hc.Do(hreq)
	if err != nil {
		return fmt.Errorf("door %s unreachable: %w", d.base, err)
	}
	defer res.Body.Close()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		var rpc jsonrpc2.Response
		if json.Unmarshal(raw, &rpc) == nil && rpc.Error != nil {
			return a2a.FromJSONRPC(rpc.Error)
		}
		return fmt.Errorf("door %s answered %s with HTTP %d %s, not a stream: %.200s", d.base, method, res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	events := a2a.NewEventReader(res.Body, maxEventBytes)
	for {
		data, err := events.Next()
		if errors.Is(err, io.EOF) {
			return errStreamClosed
		}
		if err != nil {
			return fmt.Errorf("reading %s's stream: %w", d.base, err)
		}
		var rpc struct {
			Result *a2a.StreamResponse `json:"result"`
			Error  *jsonrpc2.Error     `json:"error"`
		}
		if err := json.Unmarshal(data, &rpc); err != nil {
			return fmt.Errorf("door %s sent a stream event that is not JSON-RPC: %.200s", d.base, data)
		}
		if rpc.Error != nil {
			return a2a.FromJSONRPC(rpc.Error)
		}
		if rpc.Result != nil && on(rpc.Result) {
			return nil
		}
	}
}

// progress prints a task's stream as it comes, one line per event: the time, the state, and what the
// member says it is doing (each tool call, the members it waits for, each artifact).
type progress struct {
	w     io.Writer
	id    a2a.TaskID
	state a2a.TaskState
	msg   *a2a.Message // the status message of a Message answer, when the door answered with one
}

// event prints one event and reports whether the follower stops here: the task ended or waits for its
// sender.
func (p *progress) event(ev *a2a.StreamResponse) bool {
	switch {
	case ev.Task != nil:
		p.id = ev.Task.ID
		p.status(ev.Task.Status, "task "+string(ev.Task.ID))
	case ev.StatusUpdate != nil:
		p.status(ev.StatusUpdate.Status, "")
	case ev.ArtifactUpdate != nil:
		a := ev.ArtifactUpdate.Artifact
		fmt.Fprintf(p.w, "%s artifact %s: %s\n", clock(nil), artifactName(a), cutLine(describeParts(a.Parts), 100))
	case ev.Message != nil:
		p.msg = ev.Message
		return true
	}
	return p.state.Terminal() || p.state.Interrupted()
}

func (p *progress) status(s a2a.TaskStatus, prefix string) {
	p.state = s.State
	line := clock(s.Timestamp) + " "
	if prefix != "" {
		line += prefix + " "
	}
	line += stateWord(s.State)
	if s.Message != nil {
		if text := s.Message.Text(); text != "" {
			line += ": " + cutLine(text, 100)
		}
	}
	fmt.Fprintln(p.w, line)
}

// clock is the local time of a status, or now.
func clock(ts *a2a.Timestamp) string {
	t := time.Now()
	if ts != nil {
		t = ts.Time
	}
	return t.Local().Format("15:04:05")
}

// stateWord is a state without its TASK_STATE_ prefix.
func stateWord(s a2a.TaskState) string { return strings.TrimPrefix(string(s), "TASK_STATE_") }

// cutLine returns the first line of s, cut to n characters, marked when something was left out.
func cutLine(s string, n int) string {
	first, rest, more := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(first); len(r) > n {
		return string(r[:n]) + "…"
	}
	if more && rest != "" {
		return first + " …"
	}
	return first
}
