package pgpush

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/member/push"
)

// A change stored at one replica is posted by another in the trace of the request that sent the task:
// the task's row keeps its traceparent, the trigger copies it into the outbox with each change (and a
// new config's first change takes it from the row), and the replica that delivers it posts it as a
// CLIENT span, the child of the request's span, whose traceparent the webhook receives.
func TestDeliveryAtAnotherReplicaIsInTheTasksTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	dsn := pgtest.Start(t).NewDatabase(t)
	r1, r2 := openStore(t, dsn, "r1"), openStore(t, dsn, "r2")

	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got = append(got, req.Header.Get("Traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()

	ctx, request := tp.Tracer("test").Start(t.Context(), "SendMessage", trace.WithSpanKind(trace.SpanKindServer))
	if err := r1.Create(ctx, task("t1", a2a.TaskStateSubmitted, "")); err != nil {
		t.Fatal(err)
	}
	request.End()
	n := openNotifier(t, r2, Config{Push: push.Config{TracerProvider: tp, Member: "lead"}})
	if _, err := n.Create(t.Context(), "", config("t1", "c1", srv.URL)); err != nil {
		t.Fatal(err)
	}
	if err := r1.Update(t.Context(), task("t1", a2a.TaskStateCompleted, "done")); err != nil {
		t.Fatal(err)
	}
	var posts []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		posts = posts[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "POST" {
				posts = append(posts, s)
			}
		}
		if len(posts) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d POST spans within 30s, want 2", len(posts))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d posts, want 2", len(got))
	}
	want := request.SpanContext()
	for i, post := range posts {
		if post.SpanKind() != trace.SpanKindClient || post.SpanContext().TraceID() != want.TraceID() || post.Parent().SpanID() != want.SpanID() {
			t.Errorf("post %d: %s span in trace %s, parent %s; want a CLIENT span in trace %s, child of %s", i, post.SpanKind(),
				post.SpanContext().TraceID(), post.Parent().SpanID(), want.TraceID(), want.SpanID())
		}
		header := "00-" + want.TraceID().String() + "-" + post.SpanContext().SpanID().String() + "-01"
		if got[i] != header {
			t.Errorf("post %d carried traceparent %q, want %q", i, got[i], header)
		}
	}
}
