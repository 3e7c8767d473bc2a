package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// The console follows the tasks it shows through the doors' streams: for every task of a member that
// has not ended, one SubscribeToTask stream, whose events update the task's row and tell the pages at
// once. A door has no stream of all its tasks, so new tasks are still found by polling ListTasks; once
// found (or sent from the console), a task's changes come from its stream.

// maxFollowsPerMember bounds the streams the console holds open to one door; tasks beyond it are
// updated by the polls alone.
const maxFollowsPerMember = 64

// streamIdle is how long a stream may send nothing at all (a door sends a keep-alive every 15 s) before
// the console takes its door for gone and closes the stream.
var streamIdle = 45 * time.Second

// refollowAfter is how long the console waits before it streams a task again whose stream ended before
// the task did (the door went down, shut down, or dropped a slow stream).
var refollowAfter = 2 * time.Second

// maxStreamEvent bounds one event of a door's stream (the first holds the task with its history).
const maxStreamEvent = 64 << 20

// follow starts streaming task id of m unless it is already streamed, too many are, it was streamed a
// moment ago and that stream broke, or the console is closing.
func (c *Console) follow(m *memberWatch, id string) {
	m.mu.Lock()
	if m.following[id] || len(m.following) >= maxFollowsPerMember || time.Now().Before(m.refollow[id]) {
		m.mu.Unlock()
		return
	}
	m.following[id] = true
	delete(m.refollow, id)
	m.mu.Unlock()
	c.mu.Lock()
	if !c.started || c.closed {
		c.mu.Unlock()
		m.mu.Lock()
		delete(m.following, id)
		m.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		err := c.followTask(m, id)
		m.mu.Lock()
		delete(m.following, id)
		if err != nil {
			m.refollow[id] = time.Now().Add(refollowAfter)
		}
		m.mu.Unlock()
		if err != nil && c.ctx.Err() == nil {
			c.log.Debug("console: a task's stream ended before the task", "member", m.Name, "task", id, "err", err)
			m.wakeUp() // read the door now: it may be down, or the task may have moved on
		}
	}()
}

// followsOf returns how many streams the console holds open to m's door.
func (m *memberWatch) followsOf() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.following)
}

// followLive starts a stream for each task of m that has not ended.
func (c *Console) followLive(m *memberWatch) {
	m.mu.Lock()
	now := time.Now()
	for id, t := range m.refollow {
		if now.After(t) {
			delete(m.refollow, id)
		}
	}
	var live []string
	for id, r := range m.tasks {
		if !r.State.Terminal() && !m.following[id] {
			live = append(live, id)
		}
	}
	m.mu.Unlock()
	for _, id := range live {
		c.follow(m, id)
	}
}

// errStreamEnded says a stream closed before its task reached a terminal state.
var errStreamEnded = errors.New("the stream closed before the task ended")

// followTask reads one task's stream until the task ends (nil), or the stream breaks, the door stops
// answering or the console closes (an error).
func (c *Console) followTask(m *memberWatch, id string) error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	// Nothing read for streamIdle, not even a keep-alive: the door is gone without closing the
	// connection. Cancelling the request ends the read below.
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()
	body, err := m.subscribe(ctx, c.stream, id)
	if err != nil {
		return err
	}
	defer body.Close()
	events := a2a.NewEventReader(readNotify{body, func() { idle.Reset(streamIdle) }}, maxStreamEvent)
	for {
		data, err := events.Next()
		if err != nil {
			if ctx.Err() != nil && c.ctx.Err() == nil {
				return fmt.Errorf("door %s sent nothing for %s", m.URL, streamIdle)
			}
			if errors.Is(err, io.EOF) {
				return errStreamEnded
			}
			return fmt.Errorf("door %s: %w", m.URL, err)
		}
		if done, err := c.onStreamEvent(m, id, data); done || err != nil {
			return err
		}
	}
}

// readNotify calls read after every read that returns bytes: anything a door sends, a keep-alive
// included, shows it is still there.
type readNotify struct {
	r    io.Reader
	read func()
}

func (n readNotify) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if k > 0 {
		n.read()
	}
	return k, err
}

// subscribe opens task id's stream at m's door (SubscribeToTask) and returns its body.
func (m *memberWatch) subscribe(ctx context.Context, hc *http.Client, id string) (io.ReadCloser, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": string(a2a.MethodSubscribeToTask),
		"params": a2a.SubscribeToTaskRequest{ID: a2a.TaskID(id)}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.client.URL(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(a2a.HeaderVersion, a2a.ProtocolVersion)
	req.Header.Set("Authorization", "Bearer "+m.token)
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("door %s unreachable: %w", m.URL, err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !bytes.HasPrefix([]byte(ct), []byte("text/event-stream")) {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		return nil, fmt.Errorf("door %s answered SubscribeToTask with HTTP %d %s: %s", m.URL, res.StatusCode, ct, snippet(raw))
	}
	return res.Body, nil
}

func snippet(b []byte) string {
	s := string(bytes.TrimSpace(b))
	return cut(s, 200)
}

// onStreamEvent applies one event of task id's stream: a JSON-RPC response whose result is a
// StreamResponse. It returns done when the task has ended (or has no more events to stream).
func (c *Console) onStreamEvent(m *memberWatch, id string, data []byte) (bool, error) {
	var rpc struct {
		Result *a2a.StreamResponse `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &rpc); err != nil {
		return false, fmt.Errorf("door %s sent a stream event that is not JSON-RPC: %s", m.URL, snippet(data))
	}
	switch {
	case rpc.Error != nil && rpc.Error.Code == int64(a2a.CodeUnsupportedOperation):
		// The task ended between the poll and the subscription: nothing to stream, the next poll
		// reads it as it ended.
		m.wakeUp()
		return true, nil
	case rpc.Error != nil:
		return false, fmt.Errorf("door %s ended the stream: %s", m.URL, rpc.Error.Message)
	case rpc.Result == nil:
		return false, nil
	}
	r := rpc.Result
	switch {
	case r.Task != nil:
		c.applyStatus(m, rowOf(m.Name, r.Task), true)
		return r.Task.Status.State.Terminal(), nil
	case r.StatusUpdate != nil:
		row := TaskRow{ID: string(r.StatusUpdate.TaskID), Member: m.Name, ContextID: r.StatusUpdate.ContextID, State: r.StatusUpdate.Status.State}
		if ts := r.StatusUpdate.Status.Timestamp; ts != nil {
			row.Updated = ts.Time
		}
		if msg := r.StatusUpdate.Status.Message; msg != nil {
			row.Status = cut(msg.Text(), 200)
		}
		c.applyStatus(m, row, false)
		return row.State.Terminal(), nil
	case r.ArtifactUpdate != nil:
		c.hub.publish(Event{Kind: "task", Member: m.Name, Task: id})
	}
	return false, nil
}

// applyStatus puts what a stream said of a task into its row, unless the row already holds something
// newer (a poll may have read it first), and tells the pages. whole is a snapshot of the task (with its
// message and caller); otherwise only the status is new.
func (c *Console) applyStatus(m *memberWatch, row TaskRow, whole bool) {
	m.mu.Lock()
	old, ok := m.tasks[row.ID]
	if ok && !row.Updated.IsZero() && row.Updated.Before(old.Updated) {
		m.mu.Unlock()
		return
	}
	if ok && row.Updated.IsZero() {
		row.Updated = old.Updated
	}
	stateChanged := !ok || old.State != row.State
	if ok && !whole {
		merged := *old
		merged.State, merged.Updated = row.State, row.Updated
		if row.Status != "" || row.State != old.State {
			merged.Status = row.Status
		}
		row = merged
	}
	if ok && *old == row {
		m.up, m.polled, m.err = true, true, ""
		m.mu.Unlock()
		return
	}
	m.tasks[row.ID] = &row
	if row.Updated.After(m.watermark) {
		m.watermark = row.Updated
	}
	if stateChanged {
		// The counts move with the task at once; the next poll reads them again from the door.
		if ok && m.counts[old.State] > 0 {
			m.counts[old.State]--
		} else if !ok {
			m.total++
		}
		m.counts[row.State]++
		m.stale = true
	}
	m.up, m.polled, m.err = true, true, ""
	m.mu.Unlock()
	c.hub.publish(Event{Kind: "task", Member: m.Name, Task: row.ID})
	if stateChanged {
		c.hub.publish(Event{Kind: "member", Member: m.Name})
	}
}
