package server

import (
	"encoding/json"
	"testing"

	"github.com/murmur-run/murmur/a2a"
)

// The fuzz targets of the streaming and push notification config methods, in the same frame as
// fuzz_test.go's: fuzzed params in a valid envelope, sent with the operator's token or a peer's, through a
// real door backed by a real session and store.

// FuzzSubscribeToTaskParams sends fuzzed SubscribeToTask params. Every task of the fuzz door has ended,
// so no params may open a stream: a subscription to an ended task is refused, as is one to a task the
// caller cannot see.
func FuzzSubscribeToTaskParams(f *testing.F) {
	fuzzParams(f, a2a.MethodSubscribeToTask, []string{
		`{"id":"$TASK"}`,
		`{"id":"$CANCELED","tenant":"t"}`,
		`{"id":"tsk_nope"}`,
		`{"id":""}`,
		`{"id":7}`,
		`{}`,
	}, func(_ *fuzzDoor, t *testing.T, params []byte, a rpcAnswer) {
		t.Fatalf("SubscribeToTask %s opened a stream, but every task of this door has ended: %s", params, a.raw)
	})
}

// FuzzSendStreamingMessageParams sends fuzzed SendStreamingMessage params. A stream's first event is
// checked as a response (checkEnvelope); a result must be the task the message started or continued.
func FuzzSendStreamingMessageParams(f *testing.F) {
	fuzzParams(f, a2a.MethodSendStreamingMessage, []string{
		`{"message":{"messageId":"s1","role":"ROLE_USER","parts":[{"text":"hello"}]}}`,
		`{"message":{"messageId":"s2","role":"ROLE_USER","contextId":"$CONTEXT","parts":[{"text":"again"}]},"configuration":{"historyLength":0}}`,
		`{"message":{"messageId":"s3","role":"ROLE_USER","taskId":"$TASK","parts":[{"text":"more"}]}}`,
		`{"message":{"messageId":"s4","role":"ROLE_USER","parts":[]}}`,
		`{"message":null}`,
	}, func(_ *fuzzDoor, t *testing.T, params []byte, a rpcAnswer) {
		var req a2a.SendMessageRequest
		if err := json.Unmarshal(jsonNames(params), &req); err != nil || req.Message == nil {
			t.Fatalf("params that are no SendMessage request opened a stream (%v): %s", err, a.raw)
		}
		var event map[string]json.RawMessage
		if err := json.Unmarshal(a.result, &event); err != nil || len(event) != 1 || event["task"] == nil {
			t.Fatalf(`a stream's first event is not {"task": ...}: %s`, a.raw)
		}
		task := decodeResultTask(t, event["task"], a)
		if req.Message.ContextID != "" && task.ContextID != req.Message.ContextID {
			t.Fatalf("the streamed task's context is %q, not the message's %q: %s", task.ContextID, req.Message.ContextID, a.raw)
		}
	})
}

// pushMethods are the four push notification config methods, chosen by a fuzzed byte.
var pushMethods = []a2a.Method{a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig, a2a.MethodListPushConfigs, a2a.MethodDeletePushConfig}

// FuzzPushConfigParams sends fuzzed params to one of the four push notification config methods, chosen
// by a fuzzed byte, on a door whose webhooks may only be on 127.0.0.1. Every task of the door is the
// operator's, so a peer never gets a result; a result for the operator names the task it was asked
// about, and a created config's URL passed the allowlist.
func FuzzPushConfigParams(f *testing.F) {
	d := newFuzzDoorWith(f, doorOptions{pushAllow: []string{"127.0.0.1"}})
	seeds := []struct {
		method int
		params string
	}{
		{0, `{"taskId":"$TASK","url":"http://127.0.0.1:9/hook"}`},
		{0, `{"taskId":"$TASK","id":"mine","url":"http://127.0.0.1:9/hook","token":"t","authentication":{"scheme":"Bearer","credentials":"c"}}`},
		{0, `{"taskId":"$TASK","url":"http://example.invalid/hook"}`},
		{0, `{"taskId":"$CANCELED","url":"ftp://127.0.0.1/x"}`},
		{1, `{"taskId":"$TASK","id":"mine"}`},
		{1, `{"taskId":"$TASK","id":""}`},
		{2, `{"taskId":"$TASK","pageSize":1}`},
		{2, `{"taskId":"tsk_nope"}`},
		{3, `{"taskId":"$TASK","id":"mine"}`},
		{3, `{}`},
	}
	for _, s := range seeds {
		f.Add(uint8(s.method), []byte(s.params), false)
		f.Add(uint8(s.method), []byte(s.params), true)
	}
	f.Fuzz(func(t *testing.T, which uint8, params []byte, peer bool) {
		method := pushMethods[int(which)%len(pushMethods)]
		params = d.expand(params)
		a, ok := d.sendParams(t, method, params, peer)
		if !ok || a.result == nil {
			return
		}
		if peer {
			t.Fatalf("a peer got a result from %s on the operator's tasks: %s", method, a.raw)
		}
		var req a2a.TaskPushNotificationConfig // taskId and id, as every one of the four requests has them
		if err := json.Unmarshal(jsonNames(params), &req); err != nil {
			t.Fatalf("params that are no %s request got a result (%v): %s", method, err, a.raw)
		}
		switch method {
		case a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig:
			var c a2a.TaskPushNotificationConfig
			if err := json.Unmarshal(a.result, &c); err != nil || c.ID == "" {
				t.Fatalf("%s's result is not a config with an id (%v): %s", method, err, a.raw)
			}
			if c.TaskID != req.TaskID {
				t.Fatalf("%s for task %q answered a config of task %q: %s", method, req.TaskID, c.TaskID, a.raw)
			}
			if method == a2a.MethodGetPushConfig && c.ID != req.ID {
				t.Fatalf("GetTaskPushNotificationConfig %q answered config %q", req.ID, c.ID)
			}
			if method == a2a.MethodCreatePushConfig && d.door.cfg.Push.CheckURL(c.URL) != nil {
				t.Fatalf("a config was created with a URL outside the allowlist: %s", a.raw)
			}
		case a2a.MethodListPushConfigs:
			var res a2a.ListTaskPushNotificationConfigsResponse
			if err := json.Unmarshal(a.result, &res); err != nil {
				t.Fatalf("the result is not a list of configs (%v): %s", err, a.raw)
			}
			for _, c := range res.Configs {
				if c.TaskID != req.TaskID {
					t.Fatalf("the configs of task %q list one of task %q: %s", req.TaskID, c.TaskID, a.raw)
				}
			}
		case a2a.MethodDeletePushConfig:
			if string(a.result) != "{}" {
				t.Fatalf("DeleteTaskPushNotificationConfig's result is %s, want {}", a.result)
			}
		}
	})
}
