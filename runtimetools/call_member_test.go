package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type fakeCaller struct {
	start CallStart
	err   error
}

func (f fakeCaller) Callable() []string { return []string{"worker", "critic"} }
func (f fakeCaller) CallMember(context.Context, string, string, string) (CallStart, error) {
	return f.start, f.err
}

func TestCallMemberResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  CallStart
		status string
		output string
		note   string
	}{
		{"started", CallStart{CallID: "mcl_1", Member: "worker", Status: "started", TaskID: "tsk_9"}, StatusOK,
			`{"call_id":"mcl_1","member":"worker","status":"started","task_id":"tsk_9"}`,
			"[call-member] worker is now working on call mcl_1. Its answer is not in this result and no tool fetches it: the runtime adds it to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling worker again before its answer arrives is refused."},
		{"busy", CallStart{CallID: "mcl_2", Member: "worker", Status: "busy", Output: "worker is busy with other work and did not take the task", DeadlineSecs: 600}, StatusOK,
			`{"call_id":"mcl_2","member":"worker","status":"busy","output":"worker is busy with other work and did not take the task"}`,
			"[call-member] worker is busy with other work and has not taken call mcl_2 yet. The runtime keeps offering it the task for up to 600s and adds worker's answer, or word that it stayed busy, to this conversation after you end your turn. Unless you still have work to hand to a different member, end your turn now by replying without calling a tool. Calling worker again before then is refused."},
		{"rejected, entry task", CallStart{CallID: "mcl_3", Member: "worker", Status: "rejected", Output: "worker did not take the task: the member is shutting down"}, StatusError,
			`{"call_id":"mcl_3","member":"worker","status":"rejected","output":"worker did not take the task: the member is shutting down"}`,
			"[call-member] Call mcl_3 to worker ended rejected, with no answer from worker. Do not present an answer of your own as worker's."},
		{"failed, a peer's task", CallStart{CallID: "mcl_4", Member: "worker", Status: "failed", Output: "worker's door could not be reached", Caller: "lead"}, StatusError,
			`{"call_id":"mcl_4","member":"worker","status":"failed","output":"worker's door could not be reached"}`,
			"[call-member] Call mcl_4 to worker ended failed, with no answer from worker. Do not present an answer of your own as worker's. If you have no answer to give without worker, call end-without-answer with the reason: the runtime then tells lead plainly that you gave none."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := (&CallMember{Members: fakeCaller{start: tc.start}}).Run(context.Background(),
				Call{Input: json.RawMessage(`{"member":"worker","task":"x"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || res.Summary != "Called worker: "+string(tc.start.Status) {
				t.Errorf("status %s summary %q", res.Status, res.Summary)
			}
			if diff := cmp.Diff(tc.output, res.Output); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.note, res.Note); diff != "" {
				t.Errorf("note (-want +got):\n%s", diff)
			}
		})
	}
	refused, _ := (&CallMember{Members: fakeCaller{err: errors.New("the refusal")}}).Run(context.Background(),
		Call{Input: json.RawMessage(`{"member":"worker","task":"x"}`)})
	if refused.Status != StatusRefused || refused.Output != "the refusal" || refused.Note != "" {
		t.Errorf("refusal %+v", refused)
	}
	m := (&CallMember{Members: fakeCaller{}}).Manifest()
	if !json.Valid(m.InputSchema) || string(m.InputSchema) != `{"properties":{"member":{"description":"the formation member to hand the task to","enum":["worker","critic"],"type":"string"},"task":{"description":"the whole of what the member is told","type":"string"}},"required":["member","task"],"type":"object"}` {
		t.Errorf("schema %s", m.InputSchema)
	}
}

type fakeEnder struct{ err error }

func (f fakeEnder) EndWithoutAnswer(string, string) (string, error) { return "lead", f.err }

func TestEndWithoutAnswerAccepted(t *testing.T) {
	res, _ := (&EndWithoutAnswer{Ender: fakeEnder{}}).Run(context.Background(), Call{Input: json.RawMessage(`{"reason":"no luck"}`)})
	if res.Status != StatusOK || res.Output != `{"status":"ending","caller":"lead"}` || res.Summary != "Ending task without an answer" ||
		res.Note != "[end-without-answer] This task ends without an answer once this turn's tool calls finish, and lead is told you gave none. The other tool calls of the same turn still run." {
		t.Errorf("%+v", res)
	}
}
