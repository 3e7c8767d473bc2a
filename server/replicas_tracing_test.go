package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/internal/spantest"
	"github.com/murmur-run/murmur/roster"
)

// A task one replica offers and another claims runs in the trace of the request that sent it (DESIGN
// §16, §17): the task's row keeps the request's traceparent, and the claiming replica's invoke_agent span
// is the child of the sending replica's SendMessage span, in the caller's trace.
func TestClaimedTaskContinuesTheTrace(t *testing.T) {
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tp, rec := spantest.Record(t)
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	capsule := filepath.Join(root, "solo")
	os.MkdirAll(capsule, 0o755)
	os.WriteFile(filepath.Join(capsule, "murmur.yaml"), []byte(gatedScript), 0o644)
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: reps\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n    replicas: 2\n    store: "+pgURL(t, dsn)+"\n"), 0o644)
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, name := range []string{"r1", "r2"} {
		f, err := StartFormation(FormationConfig{Roster: r, Only: []string{"solo"}, DataDir: filepath.Join(root, "data"),
			RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: testOperatorToken, Formation: testFormationToken},
			Version: "test", Replica: name, Lease: 2 * time.Second, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.WriteFile(filepath.Join(capsule, "go"), nil, 0o644)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := f.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		})
		urls = append(urls, f.Members[0].URL)
	}
	send := func(text, traceparent string) a2a.TaskID {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":%q}]},"configuration":{"returnImmediately":true}}}`,
			ids.New(ids.PrefixMessage), text)
		req, _ := http.NewRequest(http.MethodPost, urls[0]+"/a2a", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result a2a.SendMessageResponse
			Error  *a2a.Error
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error != nil || out.Result.Task == nil {
			t.Fatalf("SendMessage %q: %v %+v", text, err, out)
		}
		return out.Result.Task.ID
	}
	// r1 runs the first task, held until "go"; the second, sent to r1 too, is offered, and r2 claims it.
	first := send("first", "")
	spantest.Wait(t, rec, func(ss spantest.Spans) bool { return len(ss.Of("solo", "SendMessage", trace.SpanKindServer)) == 1 })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if o := (&replicaSet{t: t, dsn: dsn}).owners()[a2ago.TaskID(first)]; o == "r1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first task never ran at r1")
		}
	}
	second := send("second", "00-"+callerTrace+"-"+callerSpan+"-01")
	os.WriteFile(filepath.Join(capsule, "go"), nil, 0o644)
	var agent, server spantest.Spans
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool {
		agent, server = nil, nil
		for _, s := range ss.Of("solo", "invoke_agent solo", trace.SpanKindInternal) {
			if spantest.AttrString(s, "a2a.task.id") == string(second) {
				agent = append(agent, s)
			}
		}
		for _, s := range ss.Of("solo", "SendMessage", trace.SpanKindServer) {
			if spantest.AttrString(s, "a2a.task.id") == string(second) {
				server = append(server, s)
			}
		}
		return len(agent) == 1 && len(server) == 1
	})
	if o := (&replicaSet{t: t, dsn: dsn}).owners()[a2ago.TaskID(second)]; o != "r2" {
		t.Fatalf("the second task ran at %q, want r2, which claimed it: %s", o, ss)
	}
	if got := server[0].SpanContext().TraceID().String(); got != callerTrace || server[0].Parent().SpanID().String() != callerSpan {
		t.Errorf("r1's SendMessage span: trace %s, parent %s; want %s, %s", got, server[0].Parent().SpanID(), callerTrace, callerSpan)
	}
	if got := agent[0].SpanContext().TraceID().String(); got != callerTrace {
		t.Errorf("r2's run of the claimed task is in trace %s, want the caller's %s: %s", got, callerTrace, ss)
	}
	spantest.WantChild(t, agent[0], server[0])
}
