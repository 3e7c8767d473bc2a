package a2a

import (
	"errors"
	"strings"
	"testing"
)

func TestJSONName(t *testing.T) {
	for in, want := range map[string]string{
		"task_id": "taskId", "reference_task_ids": "referenceTaskIds", "status_timestamp_after": "statusTimestampAfter",
		"task_push_notification_config": "taskPushNotificationConfig", "historyLength": "historyLength", "id": "id",
	} {
		if got := JSONName(in); got != want {
			t.Errorf("JSONName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJSONNames: proto field names become JSON names at every level but the free-form ones, a field
// under both names with different values is refused, and params without one come back untouched.
func TestJSONNames(t *testing.T) {
	camel := []byte(`{"message":{"messageId":"m","metadata":{"call_id":"x"},"parts":[{"data":{"a_b":1}}]}}`)
	got, err := JSONNames(camel)
	if err != nil || &got[0] != &camel[0] {
		t.Errorf("params without a snake_case key were copied or refused: %s, %v", got, err)
	}
	for _, tc := range []struct{ in, want, refused string }{
		{in: `{"message":{"message_id":"m","task_id":"t","metadata":{"call_id":"x"},"parts":[{"data":{"a_b":1},"media_type":"application/json"}]},"configuration":{"history_length":0,"task_push_notification_config":{"task_id":"t","url":"u"}}}`,
			want: `{"configuration":{"historyLength":0,"taskPushNotificationConfig":{"taskId":"t","url":"u"}},"message":{"messageId":"m","metadata":{"call_id":"x"},"parts":[{"data":{"a_b":1},"mediaType":"application/json"}],"taskId":"t"}}`},
		{in: `{"id":"t","history_length":2,"historyLength":2}`, want: `{"historyLength":2,"id":"t"}`},
		{in: `{"page_size":12345678901234567890}`, want: `{"pageSize":12345678901234567890}`},
		{in: `{"id":"t","history_length":2,"historyLength":3}`, refused: `historyLength: given twice with different values, as "historyLength" and "history_length"`},
		{in: `{"message":{"context_id":"a","contextId":"b"}}`, refused: `message.contextId: given twice`},
	} {
		got, err := JSONNames([]byte(tc.in))
		if tc.refused != "" {
			if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %v, want refused with %q", tc.in, err, tc.refused)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.in, got, err, tc.want)
		}
	}
}

func FuzzJSONNames(f *testing.F) {
	f.Add([]byte(`{"message":{"message_id":"m","metadata":{"a_b":1}}}`))
	f.Add([]byte(`{"a_b":[{"c_d":"\"_"}],"aB":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := JSONNames(b)
		if err != nil {
			return
		}
		if again, err := JSONNames(out); err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %s -> %s -> %s (%v)", b, out, again, err)
		}
	})
}
