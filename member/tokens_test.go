package member

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/murmur-run/murmur/member/driver"
)

// playAnswers starts a provider on loopback that answers its requests with bodies, in order, repeating
// the last. (The drivers' wire-format tests in member/driver have the full fake, with fixtures.)
func playAnswers(t *testing.T, bodies ...string) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		body := bodies[min(n, len(bodies)-1)]
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// SPEC, session-status: tokens.* are "Sums of what the provider reported"; tokens.unreported_calls counts
// "inference records that carried no count"; context.measured_by is "estimate" when that call reported
// none. A provider answer without usage, through the agent loop, for both real drivers.
func TestUnreportedUsageIsNotSummed(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	for _, p := range []struct {
		driver, model, toolCall, text string
	}{
		{"openai", "gpt-4.1-mini",
			`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"session-status","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			`{"id":"c2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":5,"total_tokens":125,"prompt_tokens_details":{"cached_tokens":100}}}`},
		{"anthropic", "claude-sonnet-4-5",
			`{"id":"m1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"session-status","input":{}}],"stop_reason":"tool_use"}`,
			`{"id":"m2","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":0}}`},
	} {
		t.Run(p.driver, func(t *testing.T) {
			f := playAnswers(t, p.toolCall, p.text, p.toolCall)
			base := f.URL
			if p.driver == "openai" {
				base += "/v1"
			}
			s, _ := startSession(t, map[string]string{
				"murmur.yaml": "name: agent\ninference:\n  driver: real\n  choices:\n    real: {driver: " + p.driver + ", model: " + p.model +
					", base_url: '" + base + "', credential: env:MUR_TEST_KEY}\n",
			}, sessionOpts{getenv: func(k string) string { return map[string]string{"MUR_TEST_KEY": "sk-test"}[k] }})
			if task := s.run(t, "go", Origin{}); answer(task) != "done" {
				t.Fatalf("task %s %q", task.Status.State, answer(task))
			}
			var inference, status []map[string]any
			for _, r := range readTrace(t, s.Session) {
				switch r["type"] {
				case "inference":
					inference = append(inference, r)
				case "session_status":
					status = append(status, r)
				}
			}
			if len(inference) != 2 || len(status) != 1 {
				t.Fatalf("%d inference and %d session_status records, want 2 and 1", len(inference), len(status))
			}
			if _, has := inference[0]["tokens"]; has || inference[0]["measured_by"] != "estimate" {
				t.Errorf("the call without usage recorded %v: it carries no count and is measured by estimate", inference[0])
			}
			if _, has := inference[1]["tokens"]; !has || inference[1]["measured_by"] != "actual" {
				t.Errorf("the call with usage recorded %v", inference[1])
			}
			// session-status answered after the first call only: nothing was reported yet.
			for path, want := range map[string]any{
				"tokens.input": "unknown", "tokens.output": "unknown", "tokens.cached": "unknown",
				"tokens.unreported_calls": 1.0, "context.measured_by": "estimate",
			} {
				if v := dig(status[0], "status."+path); v != want {
					t.Errorf("session-status %s = %#v, want %#v (record %v)", path, v, want, status[0])
				}
			}
		})
	}
}
