package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/murmur-run/murmur/a2a"
)

// A client's message marshals to A2A 1.0's JSON: camelCase names, ProtoJSON enum names, no "kind".
func ExampleMessage() {
	msg := a2a.Message{
		MessageID: "msg-1",
		Role:      a2a.RoleUser,
		Parts:     []a2a.Part{a2a.TextPart("Translate this into French: good morning")},
		ContextID: "ctx-1",
	}
	out, err := json.Marshal(msg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output:
	// {"messageId":"msg-1","role":"ROLE_USER","parts":[{"text":"Translate this into French: good morning"}],"contextId":"ctx-1"}
}

// The params of SendMessage: the message, and how the door should answer it.
func ExampleSendMessageRequest() {
	history := 0
	req := a2a.SendMessageRequest{
		Message: &a2a.Message{MessageID: "msg-1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hello")}},
		Configuration: &a2a.SendMessageConfig{
			ReturnImmediately: true,
			HistoryLength:     &history,
		},
	}
	out, _ := json.MarshalIndent(req, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "message": {
	//     "messageId": "msg-1",
	//     "role": "ROLE_USER",
	//     "parts": [
	//       {
	//         "text": "hello"
	//       }
	//     ]
	//   },
	//   "configuration": {
	//     "returnImmediately": true,
	//     "historyLength": 0
	//   }
	// }
}

// A task as a door sends it, parsed back: its state, and the text of its response artifact.
func ExampleTask() {
	wire := `{
	  "id": "tsk-1",
	  "contextId": "ctx-1",
	  "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-02T10:30:00.123Z"},
	  "artifacts": [{"artifactId": "art-1", "name": "response", "parts": [{"text": "bonjour"}]}],
	  "history": [{"messageId": "msg-1", "role": "ROLE_USER", "parts": [{"text": "good morning"}]}]
	}`
	var task a2a.Task
	if err := json.Unmarshal([]byte(wire), &task); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("state:", task.Status.State, "terminal:", task.Status.State.Terminal())
	fmt.Println("at:", task.Status.Timestamp.Format(time.RFC3339Nano))
	fmt.Println("asked:", task.History[0].Text())
	if art, ok := task.Artifact("response"); ok {
		fmt.Println("answer:", art.Text())
	}
	// Output:
	// state: TASK_STATE_COMPLETED terminal: true
	// at: 2026-01-02T10:30:00.123Z
	// asked: good morning
	// answer: bonjour
}

// A Timestamp always goes out in UTC with milliseconds and a Z, whatever the zone it was made in.
func ExampleNewTimestamp() {
	paris := time.FixedZone("CET", 3600)
	status := a2a.TaskStatus{
		State:     a2a.TaskStateWorking,
		Timestamp: a2a.NewTimestamp(time.Date(2026, 1, 2, 11, 30, 0, 123456789, paris)),
	}
	out, _ := json.Marshal(status)
	fmt.Println(string(out))
	// Output:
	// {"state":"TASK_STATE_WORKING","timestamp":"2026-01-02T10:30:00.123Z"}
}

func ExampleTaskState_Terminal() {
	for _, s := range []a2a.TaskState{
		a2a.TaskStateSubmitted,
		a2a.TaskStateWorking,
		a2a.TaskStateInputRequired,
		a2a.TaskStateCompleted,
		a2a.TaskStateFailed,
		a2a.TaskStateCanceled,
	} {
		fmt.Printf("%-26s terminal=%-5v interrupted=%v\n", s, s.Terminal(), s.Interrupted())
	}
	// Output:
	// TASK_STATE_SUBMITTED       terminal=false interrupted=false
	// TASK_STATE_WORKING         terminal=false interrupted=false
	// TASK_STATE_INPUT_REQUIRED  terminal=false interrupted=true
	// TASK_STATE_COMPLETED       terminal=true  interrupted=false
	// TASK_STATE_FAILED          terminal=true  interrupted=false
	// TASK_STATE_CANCELED        terminal=true  interrupted=false
}

// A failure deep in a door wraps one of the protocol's errors with %w; ToJSONRPC, at the edge, finds it
// and writes the one wire error with its google.rpc.ErrorInfo. An error that wraps none reveals nothing.
func ExampleToJSONRPC() {
	err := fmt.Errorf("store.Get tsk-9: %w", a2a.ErrTaskNotFound.WithMeta("taskId", "tsk-9"))
	wire := a2a.ToJSONRPC(err)
	fmt.Println(wire.Code, wire.Message)
	fmt.Println(string(*wire.Data))

	internal := a2a.ToJSONRPC(errors.New("disk full at /var/lib/murmur"))
	fmt.Println(internal.Code, internal.Message, internal.Data == nil)
	// Output:
	// -32001 Task not found
	// [{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{"taskId":"tsk-9"}}]
	// -32603 Internal error true
}

// A client turns a wire error back into an *Error, and matches it with errors.Is, never by its text.
func ExampleFromJSONRPC() {
	data := json.RawMessage(`[{"@type":"type.googleapis.com/google.rpc.BadRequest",` +
		`"fieldViolations":[{"field":"message.parts","description":"must not be empty"}]}]`)
	err := a2a.FromJSONRPC(&jsonrpc2.Error{Code: a2a.CodeInvalidParams, Message: "Invalid params", Data: &data})

	fmt.Println(errors.Is(err, a2a.ErrInvalidParams), errors.Is(err, a2a.ErrTaskNotFound))
	fmt.Println(err.Violations[0].Field+":", err.Violations[0].Description)
	fmt.Println(err)
	// Output:
	// true false
	// message.parts: must not be empty
	// Invalid params (-32602): message.parts: must not be empty
}

// Clients may spell the params' fields as a2a.proto does; JSONNames renames them to the JSON names this
// package decodes, leaving the sender's own metadata alone.
func ExampleJSONNames() {
	params := []byte(`{"id":"tsk-1","history_length":2,"metadata":{"my_key":1}}`)
	out, err := a2a.JSONNames(params)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	var req a2a.GetTaskRequest
	_ = json.Unmarshal(out, &req)
	fmt.Println(req.ID, *req.HistoryLength)
	// Output:
	// {"historyLength":2,"id":"tsk-1","metadata":{"my_key":1}}
	// tsk-1 2
}

// A door's stream, read one event at a time; each event's data is a StreamResponse.
func ExampleEventReader() {
	stream := ": keep-alive\n\n" +
		`data: {"statusUpdate":{"taskId":"tsk-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}` + "\n\n" +
		`data: {"task":{"id":"tsk-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}` + "\n\n"
	events := a2a.NewEventReader(strings.NewReader(stream), 1<<20)
	for {
		data, err := events.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		var ev a2a.StreamResponse
		if err := json.Unmarshal(data, &ev); err != nil {
			fmt.Println(err)
			return
		}
		switch {
		case ev.StatusUpdate != nil:
			fmt.Println("status update:", ev.StatusUpdate.Status.State)
		case ev.Task != nil:
			fmt.Println("task:", ev.Task.Status.State)
		}
	}
	// Output:
	// status update: TASK_STATE_WORKING
	// task: TASK_STATE_COMPLETED
}

// A Client posts JSON-RPC to a door; here the door is a stand-in that answers every SendMessage with a
// completed task echoing the text.
func ExampleClient_SendMessage() {
	door := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     jsonrpc2.ID            `json:"id"`
			Method string                 `json:"method"`
			Params a2a.SendMessageRequest `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		task := a2a.Task{ID: "tsk-1", ContextID: "ctx-1",
			Status:    a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Artifacts: []a2a.Artifact{{ArtifactID: "art-1", Name: "response", Parts: []a2a.Part{a2a.TextPart("echo: " + req.Params.Message.Text())}}},
		}
		result, _ := json.Marshal(a2a.SendMessageResponse{Task: &task})
		raw := json.RawMessage(result)
		_ = json.NewEncoder(w).Encode(jsonrpc2.Response{ID: req.ID, Result: &raw})
	}))
	defer door.Close()

	client := a2a.NewClient(door.URL, "a-bearer-token", door.Client())
	resp, err := client.SendMessage(context.Background(), &a2a.SendMessageRequest{
		Message: &a2a.Message{MessageID: "msg-1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hello")}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	art, _ := resp.Task.Artifact("response")
	fmt.Println(resp.Task.Status.State, art.Text())
	// Output:
	// TASK_STATE_COMPLETED echo: hello
}
