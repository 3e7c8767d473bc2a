package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/murmur-run/murmur/member/driver"
)

// fakeOpenAI is a local server speaking the Chat Completions API: the first call of a conversation
// asks for session-status, the second answers with what the tool returned.
type fakeOpenAI struct {
	mu       sync.Mutex
	requests []map[string]any
	auth     []string
	// tool and args are the call the first answer asks for, the arguments as the model would write
	// them; "" asks for session-status with {}.
	tool, args string
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.requests = append(f.requests, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	msgs := body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	w.Header().Set("Content-Type", "application/json")
	if last["role"] != "tool" {
		f.mu.Lock()
		tool, args := f.tool, f.args
		f.mu.Unlock()
		if tool == "" {
			tool, args = "session-status", "{}"
		}
		quoted, _ := json.Marshal(args)
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1753193455,"model":"local-model",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":%q,"arguments":%s}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":91,"completion_tokens":14,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":64}}}`, tool, quoted)
		return
	}
	content, _ := json.Marshal("the tool said: " + last["content"].(string))
	fmt.Fprintf(w, `{"id":"chatcmpl-2","object":"chat.completion","created":1753193456,"model":"local-model",
"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],
"usage":{"prompt_tokens":200,"completion_tokens":30,"total_tokens":230}}`, content)
}

func TestMemberOnAnOpenAICompatibleServer(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	fake := &fakeOpenAI{}
	llm := httptest.NewServer(fake)
	defer llm.Close()
	t.Setenv("MUR_TEST_LLM_KEY", "sk-local-test-key")
	capsule := fmt.Sprintf(`name: local-llm
instructions: You are a careful agent.
inference:
  driver: local
  choices:
    local: {driver: openai, model: local-model, base_url: %s/v1, credential: env:MUR_TEST_LLM_KEY}
`, llm.URL)
	f := startDoor(t, map[string]string{"murmur.yaml": capsule})
	task := sendTask(t, f.client(testOperatorToken), "how is the session", false)
	if task.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("task %s: %s", task.Status.State, statusText(task))
	}
	got := responseText(task)
	if !strings.HasPrefix(got, "the tool said: <untrusted-content source=tool:session-status>\n{\"time\":") ||
		!strings.Contains(got, `"tokens":{"input":91,"output":14,"cached":64`) {
		t.Errorf("answer %q: want the fenced session-status result, with the first call's usage", got)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.requests) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(fake.requests))
	}
	first := fake.requests[0]
	msgs := first["messages"].([]any)
	if sys := msgs[0].(map[string]any); sys["role"] != "system" || sys["content"] != "You are a careful agent." {
		t.Errorf("system message %v", sys)
	}
	if first["model"] != "local-model" {
		t.Errorf("model %v", first["model"])
	}
	tools, _ := json.Marshal(first["tools"])
	if !strings.Contains(string(tools), `"name":"session-status"`) {
		t.Errorf("tools sent %s, want session-status", tools)
	}
	if fake.auth[0] != "Bearer sk-local-test-key" {
		t.Errorf("Authorization %q", fake.auth[0])
	}
}

// A model's own JSON reaches the tool as the model wrote it: background-command takes "wait_secs": 5.0
// as five seconds (it goes on to look for the work id) and refuses 5.5, through a real driver's wire
// format rather than the script driver, which writes its numbers itself.
func TestModelNumbersReachTheToolAsWritten(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	fake := &fakeOpenAI{tool: "background-command"}
	llm := httptest.NewServer(fake)
	defer llm.Close()
	t.Setenv("MUR_TEST_LLM_KEY", "sk-local-test-key")
	capsule := fmt.Sprintf("name: waiter\ninference:\n  driver: local\n  choices:\n    local: {driver: openai, model: local-model, base_url: %s/v1, credential: env:MUR_TEST_LLM_KEY}\n"+
		"capabilities: {shell: {allow: [echo]}}\nlifecycle: {shell_grace_secs: 5}\n", llm.URL)
	f := startDoor(t, map[string]string{"murmur.yaml": capsule})
	for _, tc := range []struct{ args, want string }{
		{`{"operation":"wait","work_id":"wrk_0123abcd","wait_secs":5.0}`, "no background command with work id `wrk_0123abcd` in this session"},
		{`{"operation":"wait","work_id":"wrk_0123abcd","wait_secs":5.5}`, "wait_secs `5.5` is not a whole number of seconds"},
	} {
		fake.mu.Lock()
		fake.args = tc.args
		fake.mu.Unlock()
		task := sendTask(t, f.client(testOperatorToken), "wait for it", false)
		if got := responseText(task); task.Status.State != a2ago.TaskStateCompleted || !strings.Contains(got, tc.want) {
			t.Errorf("arguments %s: task %s, answer %q, want it to carry %q", tc.args, task.Status.State, got, tc.want)
		}
	}
}
