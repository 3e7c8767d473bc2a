package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/spantest"
)

// A peer-file fetch is one hop of the formation's trace: worker's fetch-peer-file call makes a CLIENT
// span that sends its traceparent to lead's door, whose SERVER span continues it, in the trace of the
// request that lead's task came from; no span shows the handle.
func TestPeerFileFetchIsTraced(t *testing.T) {
	tp, rec := spantest.Record(t)
	fx := startFormationWith(t, map[string]string{
		"roster.yaml":      "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml": agentOf("lead") + "exports: {peer_files: out}\n",
		"lead/script.yaml": "rules:\n  - match: '^share (?P<p>\\S+)$'\n    turns:\n" +
			"      - call: [{tool: share-file, input: {path: '{{.p}}'}}]\n" +
			"      - call: [{tool: call-member, input: {member: worker, task: 'please fetch {{(index .results 0).data.handle}}'}}]\n" +
			"      - say: waiting\n" +
			"      - say: '{{.transcript}}'\n",
		"worker/murmur.yaml": strings.Replace(agentOf("worker"), "network:", "peer_fetch: true, network:", 1),
		"worker/script.yaml": "rules:\n  - match: '(?P<h>pf1\\.[A-Za-z0-9_-]+)'\n    turns:\n" +
			"      - call: [{tool: fetch-peer-file, input: {handle: '{{.h}}', as: inbox/report.txt}}]\n" +
			"      - say: '{{(index .results 0).text}}'\n",
	}, Tokens{Operator: peerTokens, Formation: "fm-peer"}, func(c *FormationConfig) { c.TracerProvider = tp })
	os.MkdirAll(filepath.Join(fx.workdir("lead"), "out"), 0o755)
	if err := os.WriteFile(filepath.Join(fx.workdir("lead"), "out", "report.txt"), []byte("the report"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := fx.ask(t, "lead", "share report.txt")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %s", task.Status.State, answerOf(task))
	}
	const route = "GET /peer-files/{handle}"
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool {
		return len(ss.Of("worker", route, trace.SpanKindClient)) == 1 && len(ss.Of("lead", route, trace.SpanKindServer)) == 1 &&
			len(ss.Of("lead", "SendMessage", trace.SpanKindServer)) == 1
	})
	request := ss.OneOf(t, "lead", "SendMessage", trace.SpanKindServer)
	call := ss.OneOf(t, "worker", "execute_tool fetch-peer-file", trace.SpanKindInternal)
	fetch := ss.OneOf(t, "worker", route, trace.SpanKindClient)
	serve := ss.OneOf(t, "lead", route, trace.SpanKindServer)
	for _, s := range []sdktrace.ReadOnlySpan{call, fetch, serve} {
		if s.SpanContext().TraceID() != request.SpanContext().TraceID() {
			t.Errorf("%s %q is in trace %s, not the request's %s", s.SpanKind(), s.Name(), s.SpanContext().TraceID(), request.SpanContext().TraceID())
		}
	}
	spantest.WantChild(t, fetch, call)
	spantest.WantChild(t, serve, fetch)
	spantest.WantAttrs(t, fetch, map[string]string{"http.request.method": "GET", "url.template": "/peer-files/{handle}", "http.response.status_code": "200",
		"server.address": "127.0.0.1", "server.port": "", "murmur.peer_file.from": "lead", "murmur.peer_file.id": ""})
	spantest.WantAttrs(t, serve, map[string]string{"http.request.method": "GET", "http.route": "/peer-files/{handle}", "http.response.status_code": "200",
		"murmur.peer_file.id": spantest.AttrString(fetch, "murmur.peer_file.id")})
	for _, s := range []sdktrace.ReadOnlySpan{fetch, serve} {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "pf1.") {
				t.Errorf("%s %q shows the handle in %s: %s", s.SpanKind(), s.Name(), kv.Key, kv.Value.Emit())
			}
		}
	}
}
