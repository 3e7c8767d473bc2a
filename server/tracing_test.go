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

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/spantest"
)

// One SendMessage to lead, which calls worker with call-member, is one trace: lead's server span, its
// invoke_agent, its chat and execute_tool spans, the client spans of the call (the send and the polls),
// worker's server spans and its invoke_agent and chat, each the child it should be, with the attributes
// of the semantic conventions; and the records of both members carry the trace and the span of their task.
func TestOneTraceAcrossTheFormation(t *testing.T) {
	tp, rec := spantest.Record(t)
	fx := startFormationWith(t, map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":   agentOf("lead"),
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: worker, task: '{{.task}}'}}]\n      - say: waiting\n      - say: '{{.message}}'\n",
		"worker/murmur.yaml": agentOf("worker"),
		"worker/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: 'worker got: {{.task}}'\n",
	}, Tokens{Operator: "op", Formation: "fm"}, func(c *FormationConfig) { c.TracerProvider = tp })
	task := fx.ask(t, "lead", "hello")
	if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(answerOf(task), "worker got: hello") {
		t.Fatalf("lead's task %s: %q", task.Status.State, answerOf(task))
	}
	ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool {
		return len(ss.Of("lead", "SendMessage", trace.SpanKindServer)) == 1 && len(ss.Of("lead", "invoke_agent lead", trace.SpanKindInternal)) == 1 &&
			len(ss.Of("worker", "invoke_agent worker", trace.SpanKindInternal)) == 1
	})

	leadServer := ss.OneOf(t, "lead", "SendMessage", trace.SpanKindServer)
	leadAgent := ss.OneOf(t, "lead", "invoke_agent lead", trace.SpanKindInternal)
	callTool := ss.OneOf(t, "lead", "execute_tool call-member", trace.SpanKindInternal)
	send := ss.OneOf(t, "lead", "SendMessage", trace.SpanKindClient)
	polls := ss.Of("lead", "GetTask", trace.SpanKindClient)
	workerServer := ss.OneOf(t, "worker", "SendMessage", trace.SpanKindServer)
	workerAgent := ss.OneOf(t, "worker", "invoke_agent worker", trace.SpanKindInternal)
	workerChat := ss.OneOf(t, "worker", "chat local", trace.SpanKindClient)
	leadChats := ss.Of("lead", "chat local", trace.SpanKindClient)
	workerReads := ss.Of("worker", "GetTask", trace.SpanKindServer)

	traceID := leadServer.SpanContext().TraceID()
	for _, s := range ss {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("%s %q of %s is in trace %s, not the request's %s", s.SpanKind(), s.Name(), spantest.AttrString(s, "murmur.member"), s.SpanContext().TraceID(), traceID)
		}
	}
	if leadServer.Parent().IsValid() {
		t.Errorf("the operator's request sent no traceparent, yet its span has the parent %s", leadServer.Parent().SpanID())
	}
	spantest.WantChild(t, leadAgent, leadServer)
	spantest.WantChild(t, callTool, leadAgent)
	spantest.WantChild(t, send, callTool)
	spantest.WantChild(t, workerServer, send)
	spantest.WantChild(t, workerAgent, workerServer)
	spantest.WantChild(t, workerChat, workerAgent)
	if len(leadChats) != 3 { // the call, "waiting", the answer
		t.Errorf("%d chat spans of lead, want 3: %s", len(leadChats), ss)
	}
	for _, c := range leadChats {
		spantest.WantChild(t, c, leadAgent)
	}
	if len(polls) == 0 || len(workerReads) != len(polls) {
		t.Errorf("%d GetTask polls from lead, %d GetTask requests served by worker", len(polls), len(workerReads))
	}
	for i := range min(len(polls), len(workerReads)) {
		spantest.WantChild(t, polls[i], callTool)
		served := false
		for _, r := range workerReads {
			served = served || r.Parent().SpanID() == polls[i].SpanContext().SpanID()
		}
		if !served {
			t.Errorf("lead's poll %s was served by no GetTask span of worker's", polls[i].SpanContext().SpanID())
		}
	}

	workerTask := spantest.AttrString(workerServer, "a2a.task.id")
	spantest.WantAttrs(t, leadServer, map[string]string{"rpc.system.name": "jsonrpc", "rpc.system": "jsonrpc", "rpc.method": "SendMessage",
		"a2a.task.id": string(task.ID), "a2a.task.state": string(a2a.TaskStateCompleted), "a2a.context.id": task.ContextID})
	spantest.WantAttrs(t, leadAgent, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead",
		"a2a.task.id": string(task.ID), "a2a.task.state": string(a2a.TaskStateCompleted), "a2a.context.id": task.ContextID,
		"gen_ai.conversation.id": task.ContextID, "murmur.turns": "3"})
	spantest.WantAttrs(t, leadChats[0], map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "murmur.script",
		"gen_ai.request.model": "local", "murmur.driver.choice": "local", "gen_ai.usage.input_tokens": "", "gen_ai.usage.output_tokens": ""})
	spantest.WantAttrs(t, callTool, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "call-member",
		"gen_ai.tool.call.id": "", "murmur.tool.status": "ok"})
	spantest.WantAttrs(t, send, map[string]string{"rpc.system.name": "jsonrpc", "rpc.method": "SendMessage", "murmur.call.member": "worker",
		"murmur.call.id": "", "server.address": "127.0.0.1", "server.port": "", "a2a.task.id": workerTask})
	spantest.WantAttrs(t, polls[len(polls)-1], map[string]string{"rpc.method": "GetTask", "a2a.task.id": workerTask,
		"a2a.task.state": string(a2a.TaskStateCompleted)})
	spantest.WantAttrs(t, workerServer, map[string]string{"rpc.method": "SendMessage", "a2a.task.state": string(a2a.TaskStateSubmitted)})
	if !strings.HasPrefix(workerTask, "tsk_") {
		t.Errorf("worker's server span names the task %q", workerTask)
	}

	// The records of each member's task carry the trace and its invoke_agent span; a tool call's record,
	// its execute_tool span.
	for _, m := range []struct {
		member, task string
		agent        sdktrace.ReadOnlySpan
	}{{"lead", string(task.ID), leadAgent}, {"worker", workerTask, workerAgent}} {
		var recs []map[string]any
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			recs = fx.records(t, m.member)
			if count(recs, "task_end") == 1 || time.Now().After(deadline) {
				break
			}
		}
		n := 0
		for _, r := range recs {
			if r["task"] != m.task {
				if r["trace_id"] != nil {
					t.Errorf("%s's record of no traced task carries a trace: %v", m.member, r)
				}
				continue
			}
			n++
			span := m.agent.SpanContext().SpanID().String()
			if r["type"] == "tool_call" {
				span = callTool.SpanContext().SpanID().String()
			}
			if r["trace_id"] != traceID.String() || r["span_id"] != span {
				t.Errorf("%s's %s record carries trace %v span %v, want %s %s", m.member, r["type"], r["trace_id"], r["span_id"], traceID, span)
			}
		}
		if n < 3 {
			t.Errorf("%d records of %s's task", n, m.member)
		}
	}
}

// A request with a valid traceparent continues the caller's trace, its task's run too; a malformed one
// starts a trace of its own and is answered all the same. With tracing off, the records say nothing of
// traces even when the request sent one.
func TestTraceparent(t *testing.T) {
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	send := func(t *testing.T, f *fixture, traceparent string) string {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
			ids.New(ids.PrefixMessage))
		req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		req.Header.Set("traceparent", traceparent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result a2a.SendMessageResponse
			Error  *a2a.Error
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error != nil || out.Result.Task == nil || out.Result.Task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the request with traceparent %q was not answered with a completed task: %v %+v", traceparent, err, out)
		}
		return string(out.Result.Task.ID)
	}
	agent := map[string]string{"murmur.yaml": "name: solo\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n"}

	t.Run("tracing on", func(t *testing.T) {
		tp, rec := spantest.Record(t)
		f := startDoorWith(t, agent, doorOptions{tracerProvider: tp})
		valid := send(t, f, "00-"+callerTrace+"-"+callerSpan+"-01")
		malformed := send(t, f, "00-"+callerTrace+"-not-a-span-id-01")
		ss := spantest.Wait(t, rec, func(ss spantest.Spans) bool {
			return len(ss.Of("solo", "invoke_agent solo", trace.SpanKindInternal)) == 2
		})
		var servers [2]sdktrace.ReadOnlySpan
		for _, s := range ss.Of("solo", "SendMessage", trace.SpanKindServer) {
			switch spantest.AttrString(s, "a2a.task.id") {
			case valid:
				servers[0] = s
			case malformed:
				servers[1] = s
			}
		}
		if servers[0] == nil || servers[1] == nil {
			t.Fatalf("no server span for one of the requests: %s", ss)
		}
		if got := servers[0].SpanContext().TraceID().String(); got != callerTrace || servers[0].Parent().SpanID().String() != callerSpan || !servers[0].Parent().IsRemote() {
			t.Errorf("the request with a valid traceparent: trace %s, parent %s; want %s, %s (remote)", got, servers[0].Parent().SpanID(), callerTrace, callerSpan)
		}
		if got := servers[1].SpanContext().TraceID().String(); got == callerTrace || servers[1].Parent().IsValid() {
			t.Errorf("the request with a malformed traceparent continued trace %s from parent %s", got, servers[1].Parent().SpanID())
		}
		for _, a := range ss.Of("solo", "invoke_agent solo", trace.SpanKindInternal) {
			switch spantest.AttrString(a, "a2a.task.id") {
			case valid:
				spantest.WantChild(t, a, servers[0])
			case malformed:
				spantest.WantChild(t, a, servers[1])
			}
		}
	})

	t.Run("tracing off", func(t *testing.T) {
		f := startDoorWith(t, agent, doorOptions{})
		send(t, f, "00-"+callerTrace+"-"+callerSpan+"-01")
		b, err := os.ReadFile(filepath.Join(f.session.RecordsDir(), "trace.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "trace_id") || strings.Contains(string(b), callerTrace) {
			t.Errorf("with tracing off the records speak of traces:\n%s", b)
		}
	})
}

// A GetTask span names the stored task it answers with, read from the task's JSON without decoding it,
// whatever the order of its keys (PostgreSQL's jsonb keeps its own) and whatever its values hold.
func TestStoredTaskAttributes(t *testing.T) {
	tp, rec := spantest.Record(t)
	for _, tc := range []struct {
		raw                  string
		id, contextID, state string
	}{
		{`{"id":"tsk_1","contextId":"ctx_1","status":{"state":"TASK_STATE_WORKING","timestamp":"x"},"history":[]}`, "tsk_1", "ctx_1", "TASK_STATE_WORKING"},
		{` { "history" : [ {"parts":[{"text":"\"id\":\"tsk_evil\", {[\\"}]} ], "metadata":{"id":"no","state":"no"},
		   "status" : { "message": {"state":"no"}, "state" : "TASK_STATE_COMPLETED" }, "contextId":"ctx_2", "id" : "tsk_2" } `,
			"tsk_2", "ctx_2", "TASK_STATE_COMPLETED"},
		{`{"id":"tsk_3","n":12.5e3,"ok":true,"nothing":null,"contextId":"ctx_3"}`, "tsk_3", "ctx_3", ""},
		{`{"id":"tsk_4","contextId":`, "tsk_4", "", ""}, // cut short: what came first is kept
		{`[1,2]`, "", "", ""},
		{`{"id":"esc\u0041ped"}`, "", "", ""}, // a value with escapes is left out rather than misread
	} {
		_, span := tp.Tracer("test").Start(context.Background(), "GetTask")
		nameRequestSpan(span, "GetTask", json.RawMessage(tc.raw), nil)
		span.End()
		ended := rec.Ended()
		s := ended[len(ended)-1]
		if got := [3]string{spantest.AttrString(s, "a2a.task.id"), spantest.AttrString(s, "a2a.context.id"), spantest.AttrString(s, "a2a.task.state")}; got != [3]string{tc.id, tc.contextID, tc.state} {
			t.Errorf("%s: %q, want %q", tc.raw, got, [3]string{tc.id, tc.contextID, tc.state})
		}
	}
}
