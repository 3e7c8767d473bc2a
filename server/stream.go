package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/store"
	"github.com/sourcegraph/jsonrpc2"
)

// The defaults of a door's streams.
const (
	// DefaultKeepAlive is how often an idle stream gets an SSE comment, so proxies and clients that time
	// out quiet connections keep it open.
	DefaultKeepAlive = 15 * time.Second
	// DefaultStreamWriteTimeout bounds one write to a stream's client: a client that takes no bytes for
	// that long has its stream closed.
	DefaultStreamWriteTimeout = 30 * time.Second
)

// Streams is what a door's streams subscribe to: an events.Hub (a member of one process) or an
// events.Feed (a replica, DESIGN §16), whose events are numbered.
type Streams interface {
	Subscribe(id a2a.TaskID, load func() ([]byte, error)) (json.RawMessage, *events.Subscription, error)
}

// resumer is a Streams whose events are numbered, so a client can come back after the last one it had
// (the SSE Last-Event-ID header).
type resumer interface {
	Resume(ctx context.Context, id a2a.TaskID, after int64) (*events.Subscription, error)
}

// lastEventKey is the context key of the number in a request's Last-Event-ID header: a client coming
// back to a stream after the last event it had.
type lastEventKey struct{}

// withLastEventID puts the number of r's Last-Event-ID header in ctx; an error when it is not one.
func withLastEventID(ctx context.Context, r *http.Request) (context.Context, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		return ctx, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return ctx, a2a.ErrInvalidRequest.With(fmt.Sprintf("the Last-Event-ID header %q is not the number of an event this door sent (the id: line of an SSE event): send it as it came, or leave it out to get the task as it stands", v))
	}
	return context.WithValue(ctx, lastEventKey{}, n), nil
}

// stream is the result of a streaming method: the first event's result (none when the client resumes
// after an event it had), then what the subscription carries until it closes.
type stream struct {
	first json.RawMessage
	sub   *events.Subscription
	free  func() // gives the stream's place in its caller's limit back (streamCap)
}

// openStream opens a stream of caller's with open once the caller's limit has room for it: past the
// limit nothing is opened, and no task is sent. The stream keeps its place until serveStream ends it.
func (d *Door) openStream(caller Caller, open func() (*stream, error)) (*stream, error) {
	free, err := d.streams.take(caller)
	if err != nil {
		return nil, err
	}
	st, err := open()
	if err != nil {
		free()
		return nil, err
	}
	st.free = free
	return st, nil
}

// isStreaming reports whether method answers with text/event-stream.
func isStreaming(method string) bool {
	return a2a.Method(method) == a2a.MethodSendStreamingMessage || a2a.Method(method) == a2a.MethodSubscribeToTask
}

// sendStreamingMessage starts a task as SendMessage does and streams it: the task first, then its
// updates until its terminal state.
func (d *Door) sendStreamingMessage(ctx context.Context, caller Caller, req *a2a.SendMessageRequest, scope store.Scope) (*stream, error) {
	if err := d.checkSend(req); err != nil {
		return nil, err
	}
	task, err := d.submit(ctx, caller, req, true)
	if err != nil {
		return nil, err
	}
	var histLen *int
	if c := req.Configuration; c != nil {
		histLen = c.HistoryLength
	}
	if task.Status.State.Terminal() {
		if task.Status.State == a2a.TaskStateRejected {
			d.pacer.pace(ctx)
		}
		task.TrimHistory(histLen)
		return &stream{first: mustTaskResult(task), sub: nil}, nil
	}
	snap, sub, err := d.cfg.Events.Subscribe(task.ID, func() ([]byte, error) {
		return d.cfg.Executor.GetJSON(context.WithoutCancel(ctx), task.ID, scope)
	})
	if err != nil {
		return nil, err
	}
	first, err := taskResult(snap, histLen)
	if err != nil {
		sub.Close()
		return nil, err
	}
	return &stream{first: first, sub: sub}, nil
}

// subscribeToTask streams a task that has not ended: the task as it stands, then its updates.
func (d *Door) subscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest, scope store.Scope) (*stream, error) {
	if err := checkTaskID("id", req.ID, "the id of the task to subscribe to"); err != nil {
		return nil, err
	}
	// The scope is checked on every subscription, also when others already watch the task.
	if _, err := d.cfg.Executor.GetJSON(ctx, req.ID, scope); err != nil {
		return nil, err
	}
	if after, ok := ctx.Value(lastEventKey{}).(int64); ok {
		rs, ok := d.cfg.Events.(resumer)
		if !ok {
			return nil, a2a.ErrUnsupportedOperation.With("this door does not number its stream events (Last-Event-ID): only a member's replicas on PostgreSQL do; subscribe without it to get the task as it stands, then its updates")
		}
		sub, err := rs.Resume(ctx, req.ID, after)
		if err != nil {
			return nil, err
		}
		return &stream{sub: sub}, nil
	}
	snap, sub, err := d.cfg.Events.Subscribe(req.ID, func() ([]byte, error) {
		return d.cfg.Executor.GetJSON(context.WithoutCancel(ctx), req.ID, scope)
	})
	if err != nil {
		return nil, err
	}
	var head struct {
		Status a2a.TaskStatus `json:"status"`
	}
	if err := json.Unmarshal(snap, &head); err != nil {
		sub.Close()
		return nil, err
	}
	if head.Status.State.Terminal() {
		sub.Close()
		return nil, a2a.ErrUnsupportedOperation.WithMeta("taskId", string(req.ID)).With(fmt.Sprintf(
			"task %s is %s: a task in a terminal state has no more events to stream; read it with GetTask", req.ID, head.Status.State))
	}
	first, err := taskResult(snap, nil)
	if err != nil {
		sub.Close()
		return nil, err
	}
	return &stream{first: first, sub: sub}, nil
}

// taskResult is the StreamResponse {"task": …} of a stored task's JSON, with at most histLen messages
// of history.
func taskResult(body []byte, histLen *int) (json.RawMessage, error) {
	if histLen == nil {
		out := make([]byte, 0, len(body)+10)
		out = append(out, `{"task":`...)
		out = append(out, body...)
		return append(out, '}'), nil
	}
	var t a2a.Task
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, err
	}
	t.TrimHistory(histLen)
	return mustTaskResult(&t), nil
}

func mustTaskResult(t *a2a.Task) json.RawMessage {
	b, err := json.Marshal(a2a.StreamResponse{Task: t})
	if err != nil {
		b, _ = json.Marshal(a2a.StreamResponse{Task: &a2a.Task{ID: t.ID, ContextID: t.ContextID, Status: t.Status}})
	}
	return b
}

// sseWriter writes one stream's events, each a JSON-RPC response carrying the request's id.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      json.RawMessage
	timeout time.Duration
	buf     bytes.Buffer
}

func newSSEWriter(w http.ResponseWriter, id json.RawMessage, timeout time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w), id: id, timeout: timeout}
}

// result writes one event holding result, with seq as its SSE id when it is numbered (above 0).
func (s *sseWriter) result(seq int64, result json.RawMessage) error {
	s.buf.Reset()
	if seq > 0 {
		s.buf.WriteString("id: ")
		s.buf.WriteString(strconv.FormatInt(seq, 10))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString(`data: {"jsonrpc":"2.0","id":`)
	s.buf.Write(s.id)
	s.buf.WriteString(`,"result":`)
	s.buf.Write(result)
	s.buf.WriteString("}\n\n")
	return s.send()
}

// error writes one event holding a JSON-RPC error.
func (s *sseWriter) error(e *jsonrpc2.Error) error {
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: s.id, Error: e})
	if err != nil {
		return err
	}
	s.buf.Reset()
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
	return s.send()
}

func (s *sseWriter) comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": " + text + "\n\n")
	return s.send()
}

func (s *sseWriter) send() error {
	if s.timeout > 0 {
		// A writer without deadlines (a test's recorder) writes without one: the stream still ends with ctx.
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	return s.rc.Flush()
}

// serveStream writes st to the client until the task ends, the subscription is dropped, the client
// goes away or the door shuts down. It owns st.sub and closes it, and gives the stream's place back.
func (d *Door) serveStream(w http.ResponseWriter, r *http.Request, id json.RawMessage, st *stream) {
	if st.free != nil {
		defer st.free()
	}
	if st.sub != nil {
		defer st.sub.Close()
	}
	// The request has been read: the server's read timeout must not end a stream that runs longer.
	// A writer without deadlines has no read timeout to lift either.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	out := newSSEWriter(w, id, d.cfg.StreamWriteTimeout)
	d.metrics.streams.Inc()
	defer d.metrics.streams.Dec()
	if st.first != nil {
		var start int64
		if st.sub != nil {
			start = st.sub.Start()
		}
		if out.result(start, st.first) != nil || st.sub == nil {
			return
		}
	}
	tick := time.NewTicker(d.cfg.StreamKeepAlive)
	defer tick.Stop()
	ctx := r.Context()
	for {
		select {
		case ev, ok := <-st.sub.Events():
			if !ok {
				if err := st.sub.Err(); err != nil {
					d.metrics.dropped.Inc()
					_ = out.error(a2a.ToJSONRPC(a2a.ErrInternal.With(err.Error()))) // the stream ends either way
				}
				return
			}
			if out.result(ev.Seq, ev.Result) != nil {
				return
			}
		case <-tick.C:
			if out.comment("keep-alive") != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-d.closing:
			_ = out.error(a2a.ToJSONRPC(a2a.ErrInternal.With("the member's door is shutting down: the stream ends here; read the task with GetTask once the member is back")))
			return
		}
	}
}

// writeStreamError answers a streaming method's error as a stream of one error event, which is how
// SSE clients (the A2A SDKs among them) expect to read it.
func writeStreamError(w http.ResponseWriter, id json.RawMessage, e *jsonrpc2.Error) {
	_ = newSSEWriter(w, id, 0).error(e) // a client gone: no one is left to tell
}
