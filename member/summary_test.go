package member

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/calls/callstest"
)

// SPEC's summaries ("passed, summary Called <member>: started", "summary Ending task without an answer")
// land in the tool_call record of each call that ran; a refused call writes none.
func TestSummariesInToolCallRecords(t *testing.T) {
	working := &a2a.Task{ID: "tsk_worker", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	s, _ := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("capabilities:\n  network: {allow: [localhost]}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n" +
			"      - call: [{tool: call-member, input: {member: worker, task: work}}, {tool: call-member, input: {member: nobody, task: x}}]\n" +
			"      - say: waiting for worker\n" +
			"      - call: [{tool: end-without-answer, input: {reason: worker has none}}]\n",
	}, sessionOpts{roster: formationOf, peers: &callstest.Peers{
		OnOffer: func(int) (*a2a.Task, error) { return working, nil },
		OnGet: func(int) (*a2a.Task, error) {
			return &a2a.Task{ID: "tsk_worker", Status: a2a.TaskStatus{State: a2a.TaskStateFailed,
				Message: &a2a.Message{Parts: []a2a.Part{a2a.TextPart("it broke")}}}}, nil
		},
	}})
	task := s.run(t, "go", Origin{Origin: OriginPeer, Caller: "worker", Trust: TrustUntrusted})
	if murmurMeta(task)["noAnswer"] != true {
		t.Fatalf("task %s %v %q, want ended without an answer", task.Status.State, murmurMeta(task), status(task))
	}
	var got []map[string]any
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "tool_call" {
			got = append(got, map[string]any{"tool": r["tool"], "status": r["status"], "summary": r["summary"]})
		}
	}
	want := []map[string]any{
		{"tool": "call-member", "status": "ok", "summary": "Called worker: started"},
		{"tool": "end-without-answer", "status": "ok", "summary": "Ending task without an answer"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool_call records (-want +got):\n%s", diff)
	}
	// Each record carries the call's input and the fenced result the model was given.
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "tool_call" && r["tool"] == "call-member" {
			in, _ := r["input"].(string)
			res, _ := r["result"].(string)
			if in != `{"member":"worker","task":"work"}` || !strings.HasPrefix(res, "<untrusted-content source=tool:call-member>\n") ||
				!strings.Contains(res, "</untrusted-content>") {
				t.Errorf("call-member's tool_call record: input %q, result %q", in, res)
			}
			break
		}
	}
	// SPEC: "A no_answer task never decides session_end.exit_status".
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range readTrace(t, s.Session) {
		if r["type"] == "session_end" && r["exit_status"] != "none" {
			t.Errorf("session_end %v: its only task ended without an answer, so no task decided its exit status", r)
		}
	}
}
