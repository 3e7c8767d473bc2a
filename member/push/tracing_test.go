package push

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/events"
	"github.com/murmur-run/murmur/member/store"
)

// Each webhook POST is a CLIENT span in the trace of the request that sent the task, whose traceparent
// the task store keeps with the task and the outbox with each change: the first delivery (the task's
// status when the config is made) and a later change alike carry that trace's traceparent, naming the
// POST's span, whose parent is the request's span.
func TestDeliveryIsInTheTasksTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	path := t.TempDir() + "/tasks.db"
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, request := tp.Tracer("test").Start(context.Background(), "SendMessage", trace.WithSpanKind(trace.SpanKindServer))
	task := &a2a.Task{ID: "tsk_traced", ContextID: "ctx_1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := st.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	request.End()

	r := newReceiver(t, 0)
	n := open(t, path, Config{TracerProvider: tp, Member: "lead"})
	defer n.Close()
	c, err := n.Create(context.Background(), "", a2a.TaskPushNotificationConfig{TaskID: task.ID, URL: r.srv.URL + "/hook?sig=secret"})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.next(t); s != a2a.TaskStateWorking {
		t.Fatalf("first delivery %s", s)
	}
	task.Status.State = a2a.TaskStateCompleted
	if err := st.Update(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	n.Changed(events.Change{TaskID: task.ID, State: a2a.TaskStateCompleted, Task: task})
	if s := r.next(t); s != a2a.TaskStateCompleted {
		t.Fatalf("second delivery %s", s)
	}
	var posts []sdktrace.ReadOnlySpan
	waitUntil(t, "both POST spans ended", func() bool {
		posts = posts[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "POST" {
				posts = append(posts, s)
			}
		}
		return len(posts) >= 2
	})
	n.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(posts) != 2 || len(r.got) != 2 {
		t.Fatalf("%d POST spans and %d deliveries, want 2 of each", len(posts), len(r.got))
	}
	want := request.SpanContext()
	for i, h := range r.got {
		post := posts[i]
		if post.SpanKind() != trace.SpanKindClient || post.Parent().SpanID() != want.SpanID() || post.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("delivery %d: %s span %s in trace %s, parent %s; want a CLIENT span in trace %s, child of the request's %s",
				i, post.SpanKind(), post.SpanContext().SpanID(), post.SpanContext().TraceID(), post.Parent().SpanID(), want.TraceID(), want.SpanID())
		}
		wantHeader := "00-" + want.TraceID().String() + "-" + post.SpanContext().SpanID().String() + "-01"
		if got := h.Get("Traceparent"); got != wantHeader {
			t.Errorf("delivery %d carried traceparent %q, want %q", i, got, wantHeader)
		}
		attrs := map[string]string{}
		for _, kv := range post.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		for k, v := range map[string]string{"http.request.method": "POST", "http.response.status_code": "200", "server.address": "127.0.0.1",
			"a2a.task.id": string(task.ID), "murmur.push.config.id": c.ID, "murmur.member": "lead"} {
			if attrs[k] != v {
				t.Errorf("delivery %d: %s = %q, want %q", i, k, attrs[k], v)
			}
		}
		if u := attrs["url.full"]; !strings.HasSuffix(u, "/hook?sig=REDACTED") || strings.Contains(u, "secret") {
			t.Errorf("delivery %d: url.full = %q, want the webhook's URL with its query values redacted", i, u)
		}
	}
}
