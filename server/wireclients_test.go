package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
)

// TestA2AGoResolveThenNewFromCard: a2a-go v2.3.1's documented path, agentcard.Resolver.Resolve then
// a2aclient.NewFromCard, reads the door's card and sends a message through the interface it names.
func TestA2AGoResolveThenNewFromCard(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, f.url)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if len(card.SecuritySchemes) == 0 {
		t.Errorf("the card read by a2a-go declares no security scheme")
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{token: testOperatorToken, base: tr}, Timeout: 30 * time.Second}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("NewFromCard: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	task := send(t, c, userMessage("hello"))
	if task.Status.State != a2ago.TaskStateCompleted || !strings.Contains(responseText(task), "hello") {
		t.Errorf("task %s answered %q, want completed with the echo", task.Status.State, responseText(task))
	}
}

// TestProtoFieldNames: requests sent as raw JSON with the proto field names (snake_case), as ProtoJSON
// clients may, are read as with the JSON names, for every method's fields and nested objects; a field
// given under both names with different values is refused naming both, with equal values taken.
func TestProtoFieldNames(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	call := func(method, params string) rpcReply {
		t.Helper()
		return f.postQuery("", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	}
	task := func(rep rpcReply, wrapped bool) a2a.Task {
		t.Helper()
		if rep.Error != nil {
			t.Fatalf("error %d %s", rep.Error.Code, rep.Error.Message)
		}
		raw := rep.Result
		if wrapped {
			var res struct{ Task json.RawMessage }
			json.Unmarshal(raw, &res)
			raw = res.Task
		}
		var out a2a.Task
		if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" {
			t.Fatalf("the result is not a task (%v): %s", err, rep.Result)
		}
		return out
	}

	first := task(call("SendMessage", `{"message":{"message_id":"m1","role":"ROLE_USER","parts":[{"text":"one"}]},
		"configuration":{"accepted_output_modes":["text/plain"],"history_length":0}}`), true)
	if first.Status.State != a2a.TaskStateCompleted || len(first.History) != 0 {
		t.Fatalf("first task %s with %d messages of history, want completed with history_length 0 honoured", first.Status.State, len(first.History))
	}
	// context_id continues the conversation; history_length 1 keeps one message.
	second := task(call("SendMessage", `{"message":{"message_id":"m2","role":"ROLE_USER","context_id":"`+first.ContextID+`",
		"parts":[{"text":"two"}]},"configuration":{"history_length":1}}`), true)
	if second.ContextID != first.ContextID || len(second.History) != 1 {
		t.Errorf("second task in context %q with %d messages, want %q and 1", second.ContextID, len(second.History), first.ContextID)
	}
	// task_id names the (completed) task: refused as a message to a terminal task, not a new task.
	rep := call("SendMessage", `{"message":{"message_id":"m3","role":"ROLE_USER","task_id":"`+string(first.ID)+`","parts":[{"text":"three"}]}}`)
	if rep.Error == nil || rep.Error.Code != a2a.CodeUnsupportedOperation {
		t.Errorf("a message with task_id of a completed task: %s %+v, want -32004", rep.Result, rep.Error)
	}
	// return_immediately: the task comes back before it ends (the echo is quick, so either is fine),
	// and reference_task_ids is read without complaint.
	task(call("SendMessage", `{"message":{"message_id":"m4","role":"ROLE_USER","reference_task_ids":["`+string(first.ID)+`"],
		"parts":[{"text":"four"}]},"configuration":{"return_immediately":true}}`), true)

	if got := task(call("GetTask", `{"id":"`+string(second.ID)+`","history_length":0}`), false); len(got.History) != 0 {
		t.Errorf("GetTask with history_length 0 returned %d messages", len(got.History))
	}
	var page a2a.ListTasksResponse
	rep = call("ListTasks", `{"context_id":"`+first.ContextID+`","page_size":1,"history_length":0,"include_artifacts":true,
		"status_timestamp_after":"2000-01-01T00:00:00.000Z"}`)
	if rep.Error != nil || json.Unmarshal(rep.Result, &page) != nil {
		t.Fatalf("ListTasks: %+v %s", rep.Error, rep.Result)
	}
	if page.PageSize != 1 || len(page.Tasks) != 1 || page.TotalSize != 2 || page.NextPageToken == "" ||
		page.Tasks[0].ContextID != first.ContextID || len(page.Tasks[0].History) != 0 || len(page.Tasks[0].Artifacts) == 0 {
		t.Errorf("ListTasks by snake_case filters: %s", rep.Result)
	}
	var next a2a.ListTasksResponse
	rep = call("ListTasks", `{"context_id":"`+first.ContextID+`","page_size":1,"page_token":"`+page.NextPageToken+`",
		"status_timestamp_after":"2000-01-01T00:00:00.000Z"}`)
	if rep.Error != nil || json.Unmarshal(rep.Result, &next) != nil || len(next.Tasks) != 1 || next.Tasks[0].ID == page.Tasks[0].ID {
		t.Errorf("ListTasks with page_token: %+v %s", rep.Error, rep.Result)
	}

	// Metadata is the sender's own: its keys are kept as they came.
	meta := task(call("SendMessage", `{"message":{"message_id":"m5","role":"ROLE_USER","parts":[{"text":"five"}],
		"metadata":{"my_key":{"deep_key":1}}}}`), true)
	if got, _ := json.Marshal(meta.History[0].Metadata); !strings.Contains(string(got), `"my_key":{"deep_key":1}`) {
		t.Errorf("message metadata came back as %s, want its keys untouched", got)
	}

	// Both spellings: the same value is taken, different values are refused naming both.
	task(call("SendMessage", `{"message":{"messageId":"m6","message_id":"m6","role":"ROLE_USER","parts":[{"text":"six"}]}}`), true)
	for _, tc := range []struct{ params, field string }{
		{`{"message":{"message_id":"a","messageId":"b","role":"ROLE_USER","parts":[{"text":"x"}]}}`, "message.messageId"},
		{`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"historyLength":1,"history_length":2}}`, "configuration.historyLength"},
	} {
		rep := call("SendMessage", tc.params)
		if rep.Error == nil || rep.Error.Code != a2a.CodeInvalidParams || !strings.Contains(rep.Error.Message, tc.field) {
			t.Errorf("%s: %+v, want -32602 on %s", tc.params, rep.Error, tc.field)
			continue
		}
		msg := rep.Error.Message
		snake := tc.field[strings.LastIndexByte(tc.field, '.')+1:]
		snake = map[string]string{"messageId": "message_id", "historyLength": "history_length"}[snake]
		if !strings.Contains(msg, `"`+snake+`"`) || !strings.Contains(msg, "different values") {
			t.Errorf("the refusal %q does not name both spellings", msg)
		}
	}
	rep = call("GetTask", `{"id":"`+string(first.ID)+`","history_length":0,"historyLength":1}`)
	if rep.Error == nil || rep.Error.Code != a2a.CodeInvalidParams {
		t.Errorf("GetTask with two history lengths: %+v, want -32602", rep.Error)
	}
	rep = call("CancelTask", `{"id":"`+string(first.ID)+`","metadata":{"a_b":1}}`)
	if rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotCancelable {
		t.Errorf("CancelTask of a completed task with snake_case metadata: %+v, want -32002", rep.Error)
	}
}

// TestClientChosenContext: a contextId no task has starts a new conversation under that id; it is its
// starter's: the starter continues it, another caller naming it is refused, and a caller's own chosen
// context is not joined by the operator either.
func TestClientChosenContext(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n" +
			"  - match: '^price of (?P<what>\\w+)$'\n    turns:\n      - say: '{{.what}} costs 12 dollars'\n" +
			"  - match: ''\n    turns:\n      - say: 'I was told: {{.transcript}}'\n",
	})
	ctx := context.Background()
	c := f.client(testOperatorToken)
	first := send(t, c, inContext("my-conversation-1", "price of tea"))
	if first.ContextID != "my-conversation-1" || first.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("task %s in context %q, want completed in my-conversation-1", first.Status.State, first.ContextID)
	}
	if got := responseText(send(t, c, inContext("my-conversation-1", "and in euros?"))); !strings.Contains(got, "tea costs 12 dollars") {
		t.Errorf("the second task of the chosen context did not see the first: %q", got)
	}
	peer := f.client(peerToken("caller", peercred.Trusted))
	_, err := peer.SendMessage(ctx, &a2ago.SendMessageRequest{Message: inContext("my-conversation-1", "what did they ask?")})
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "not one of your conversations") {
		t.Errorf("a peer naming the operator's chosen context: %v, want it refused", err)
	}
	theirs := send(t, peer, inContext("peer-conversation", "price of coffee"))
	if theirs.ContextID != "peer-conversation" {
		t.Fatalf("the peer's task is in context %q", theirs.ContextID)
	}
	if got := responseText(send(t, peer, inContext("peer-conversation", "and in euros?"))); !strings.Contains(got, "coffee") || strings.Contains(got, "tea") {
		t.Errorf("the peer's second task saw %q", got)
	}
	if _, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: inContext("peer-conversation", "me too")}); !errors.Is(err, a2ago.ErrInvalidParams) {
		t.Errorf("the operator in the peer's chosen context: %v, want it refused", err)
	}
	if _, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: inContext(strings.Repeat("x", a2a.MaxIDBytes+1), "hi")}); !errors.Is(err, a2ago.ErrInvalidParams) {
		t.Errorf("a contextId longer than any id: %v, want it refused", err)
	}
}

// TestDataAnswerComesFirst: a data answer's data artifact comes before the response artifact holding
// its JSON as text, so a client reading the first artifact gets the data part.
func TestDataAnswerComesFirst(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - data: {item: tea, price: 12}\n",
	})
	task := send(t, f.client(testOperatorToken), userMessage("price?"))
	if task.Status.State != a2ago.TaskStateCompleted || len(task.Artifacts) < 2 {
		t.Fatalf("task %s with %d artifacts, want completed with data and response", task.Status.State, len(task.Artifacts))
	}
	var names []string
	for _, a := range task.Artifacts {
		names = append(names, a.Name)
	}
	if names[0] != "data" || names[1] != "response" {
		t.Fatalf("artifacts %v, want data first, then response", names)
	}
	d, ok := task.Artifacts[0].Parts[0].Content.(a2ago.Data)
	if !ok {
		t.Fatalf("the first artifact's part is %T, want data", task.Artifacts[0].Parts[0].Content)
	}
	if got, _ := json.Marshal(d.Value); string(got) != `{"item":"tea","price":12}` {
		t.Errorf("the data part holds %s", got)
	}
}
