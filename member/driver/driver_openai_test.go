//go:build !offline

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/murmur-run/murmur/member/capsule"
)

// The fixtures under testdata/openai are Chat Completions answers in the shapes the OpenAI API sends
// (no_usage.json is the one the SDK's own tests use; ollama_text.json is Ollama's /v1 shape).

const openAITestKey = "sk-test-9f3Kq2LmZx7VbN4cRt8YwJ0pHs6DgAe1wxyz"

// The fake OpenAI-compatible server: a providerFake serving testdata/openai.
type (
	openAIRequest = fakeRequest
	openAIAnswer  = fakeAnswer
	openAIFake    = providerFake
)

func newOpenAIFake(t *testing.T, answers ...openAIAnswer) *openAIFake {
	t.Helper()
	return newProviderFake(t, "openai", answers...)
}

func openAIFixture(t *testing.T, name string) []byte {
	t.Helper()
	return providerFixture(t, "openai", name)
}

// openAIEnv is a getenv whose variables a test may change between calls.
type openAIEnv = testEnv

// newOpenAITestDriver is the driver of choice gpt on the fake server, its key in MUR_TEST_OPENAI_KEY.
func newOpenAITestDriver(t *testing.T, f *openAIFake, edit func(*capsule.Choice)) (*OpenAIDriver, *openAIEnv) {
	t.Helper()
	env := &openAIEnv{vars: map[string]string{"MUR_TEST_OPENAI_KEY": openAITestKey}}
	ch := capsule.Choice{Driver: capsule.DriverOpenAI, Model: "gpt-4.1-mini", BaseURL: f.URL + "/v1", Credential: "env:MUR_TEST_OPENAI_KEY"}
	if edit != nil {
		edit(&ch)
	}
	d, err := NewOpenAI("gpt", ch, f.Client(), env.getenv)
	if err != nil {
		t.Fatal(err)
	}
	return d, env
}

func openAITask(text string) InferRequest {
	return InferRequest{System: "You are a worker.", Messages: []ChatMessage{{Role: RoleUser, Text: text}}, Turn: 1, Task: text}
}

func TestOpenAITextAnswer(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	if d.Name() != "gpt" {
		t.Errorf("Name() = %q, want the choice name gpt", d.Name())
	}
	got, err := d.Infer(t.Context(), openAITask("sum 2 3"))
	if err != nil {
		t.Fatal(err)
	}
	want := InferResponse{Text: "2 + 3 = 5", Usage: Usage{Input: 1234, Output: 7, Cached: 1024, Reported: true, CacheReported: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1/chat/completions" {
		t.Fatalf("requests = %+v, want one POST /v1/chat/completions", reqs)
	}
}

func TestOpenAIToolCallAnswer(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "tool_call.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	got, err := d.Infer(t.Context(), openAITask("sum 2 3"))
	if err != nil {
		t.Fatal(err)
	}
	want := InferResponse{
		Calls: []ToolCall{{ID: "call_Qm3sT8vLx2KpW9nYb4ZrJ6dE", Name: "expr", Input: json.RawMessage(`{"args":["2","+","3"]}`)}},
		Usage: Usage{Input: 91, Output: 14, Reported: true, CacheReported: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// TestOpenAIConversationRequest checks the whole body sent for a conversation of several turns against
// testdata/openai/conversation_request.json, and the request's headers.
func TestOpenAIConversationRequest(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, _ := newOpenAITestDriver(t, f, func(ch *capsule.Choice) { ch.MaxOutputTokens = 512 })
	req := InferRequest{
		System: "You are a worker. Answer arithmetic questions.",
		Messages: []ChatMessage{
			{Role: RoleUser, Text: "<untrusted-content source=task>\nsum 2 3 and tell me the session status\n</untrusted-content>"},
			{Role: RoleAssistant, Text: "I will compute it and look at the session.", Calls: []ToolCall{
				{ID: "call_a", Name: "expr", Input: json.RawMessage(`{"args":["2","+","3"]}`)},
				{ID: "call_b", Name: "session-status", Input: json.RawMessage(`{}`)},
			}},
			{Role: RoleTool, Results: []ToolResult{
				{CallID: "call_a", Tool: "expr", Status: "ok", Output: "5", Text: Fence("tool:expr", "5", "")},
				{CallID: "call_b", Tool: "session-status", Status: "ok", Output: `{"turns":{"used":1}}`,
					Text: Fence("tool:session-status", `{"turns":{"used":1}}`, "note: the deadline is in 2h")},
			}},
			{Role: RoleAssistant, Calls: []ToolCall{{ID: "call_c", Name: "read-file", Input: json.RawMessage(`{"path":"out/x"}`)}}},
			{Role: RoleTool, Results: []ToolResult{
				{CallID: "call_c", Tool: "read-file", Status: "refused", Output: "not staged", Text: "read-file is not staged for this session"},
			}},
		},
		Tools: []ToolSpec{
			{Name: "expr", Description: "Evaluates an arithmetic expression.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}},"required":["args"]}`)},
			{Name: "session-status", Description: "Reports the session's time, turns, context, tokens and spend."},
			{Name: "plan-submit", Description: "Submits the plan.", InputSchema: json.RawMessage(`{}`)},
		},
		Turn: 3,
		Task: "sum 2 3 and tell me the session status",
	}
	if _, err := d.Infer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if got, want := reqs[0].Header.Get("Authorization"), "Bearer "+openAITestKey; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if ct := reqs[0].Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got, want any
	if err := json.Unmarshal(reqs[0].Body, &got); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, reqs[0].Body)
	}
	if err := json.Unmarshal(openAIFixture(t, "conversation_request.json"), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestOpenAIProviderErrors(t *testing.T) {
	tests := []struct {
		name     string
		answer   openAIAnswer
		requests int // the SDK retries 429 and 5xx, twice
		status   int
		want     []string
	}{
		{
			name: "rate limit",
			// retry-after-ms keeps the SDK's waits between the three attempts short.
			answer:   openAIAnswer{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After-Ms": "1"}, Fixture: "rate_limit.json"},
			requests: 3,
			status:   429,
			want:     []string{": 429 Too Many Requests: Rate limit reached for gpt-4.1-mini in organization org-Xq2v8Lk3mN0pR7sT on tokens per min (TPM)"},
		},
		{
			name:     "bad request",
			answer:   openAIAnswer{Status: http.StatusBadRequest, Fixture: "bad_request.json"},
			requests: 1,
			status:   400,
			want:     []string{": 400 Bad Request: An assistant message with 'tool_calls' must be followed by tool messages"},
		},
		{
			name:     "key quoted back",
			answer:   openAIAnswer{Status: http.StatusUnauthorized, Fixture: "invalid_api_key.json"},
			requests: 1,
			status:   401,
			want:     []string{": 401 Unauthorized: Incorrect API key provided: sk-[redacted]. You can find your API key at"},
		},
		{
			name:     "not an OpenAI error",
			answer:   openAIAnswer{Status: http.StatusNotFound, Header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, Body: "404 page not found\n"},
			requests: 1,
			status:   404,
			want:     []string{": 404 Not Found: 404 page not found"},
		},
		{
			name:     "server error",
			answer:   openAIAnswer{Status: http.StatusServiceUnavailable, Header: map[string]string{"Retry-After-Ms": "1"}, Body: `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error","param":null,"code":null}}`},
			requests: 3,
			status:   503,
			want:     []string{": 503 Service Unavailable: The server is overloaded or not ready yet."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOpenAIFake(t, tt.answer)
			d, _ := newOpenAITestDriver(t, f, nil)
			_, err := d.Infer(t.Context(), openAITask("sum 2 3"))
			if err == nil {
				t.Fatal("Infer succeeded, want an error")
			}
			msg := err.Error()
			t.Log(msg)
			where := "openai choice gpt (model gpt-4.1-mini at " + f.URL + "/v1)"
			if !strings.HasPrefix(msg, where) {
				t.Errorf("error %q does not start with %q", msg, where)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, openAITestKey) || strings.Contains(msg, "wxyz") {
				t.Errorf("error %q shows the key", msg)
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Errorf("error does not unwrap to an *openai.Error with status %d: %#v", tt.status, err)
			}
			if n := len(f.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestOpenAICredentialResolvedOnEveryCall(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, env := newOpenAITestDriver(t, f, nil)
	env.set("MUR_TEST_OPENAI_KEY", "")
	_, err := d.Infer(t.Context(), openAITask("sum 2 3"))
	if err == nil {
		t.Fatal("Infer succeeded without the key, want an error")
	}
	for _, w := range []string{"openai choice gpt (model gpt-4.1-mini at ", "env:MUR_TEST_OPENAI_KEY", "the environment variable MUR_TEST_OPENAI_KEY is not set"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests made without a credential, want none", n)
	}

	// The key is set, then rotated: each call sends the key of its time.
	for _, key := range []string{"sk-first-key", "sk-rotated-key"} {
		env.set("MUR_TEST_OPENAI_KEY", key)
		if _, err := d.Infer(t.Context(), openAITask("sum 2 3")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, want := range []string{"Bearer sk-first-key", "Bearer sk-rotated-key"} {
		if got := reqs[i].Header.Get("Authorization"); got != want {
			t.Errorf("request %d: Authorization = %q, want %q", i+1, got, want)
		}
	}
}

func TestOpenAINoUsageIsEstimated(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "no_usage.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	req := openAITask("say test")
	got, err := d.Infer(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := InferResponse{Text: "test", Usage: Usage{Input: EstimateInput(req), Output: EstimateTokens("test"), Estimated: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if got.Usage.Input == 0 {
		t.Error("estimated input is 0")
	}
}

// TestOpenAILocalServerWithoutCredential is a choice such as Ollama's: a base_url and no credential.
// No Authorization is sent, and the OPENAI_* variables of the process are not consulted.
func TestOpenAILocalServerWithoutCredential(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient-key-from-the-process")
	t.Setenv("OPENAI_BASE_URL", "http://192.0.2.1:9/v1")
	f := newOpenAIFake(t, openAIAnswer{Fixture: "ollama_text.json"})
	d, _ := newOpenAITestDriver(t, f, func(ch *capsule.Choice) { ch.Model, ch.Credential = "llama3.2", "" })
	got, err := d.Infer(t.Context(), openAITask("hello"))
	if err != nil {
		t.Fatal(err)
	}
	want := InferResponse{Text: "Hello from a local model.", Usage: Usage{Input: 26, Output: 7, Reported: true, CacheReported: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests reached the local server, want 1", len(reqs))
	}
	if h, ok := reqs[0].Header["Authorization"]; ok {
		t.Errorf("Authorization %q sent to a server the choice gives no credential for", h)
	}
}

// openAIRedirect sends every request to a loopback server, recording the URL it was meant for.
type openAIRedirect struct {
	to   *url.URL
	next http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (r *openAIRedirect) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, ""
	return r.next.RoundTrip(req)
}

// TestOpenAIDefaultEndpoint is a choice without base_url: its requests go to the OpenAI API (here
// redirected to loopback by the transport) with the output cap in max_completion_tokens.
func TestOpenAIDefaultEndpoint(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	to, _ := url.Parse(f.URL)
	transport := f.Client().Transport
	rt := &openAIRedirect{to: to, next: transport}
	env := map[string]string{"OPENAI_API_KEY": openAITestKey}
	ch := capsule.Choice{Driver: capsule.DriverOpenAI, Model: "gpt-4.1-mini", Credential: "env:OPENAI_API_KEY", MaxOutputTokens: 2048}
	d, err := NewOpenAI("gpt", ch, &http.Client{Transport: rt}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Infer(t.Context(), openAITask("sum 2 3")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"https://api.openai.com/v1/chat/completions"}, rt.urls); diff != "" {
		t.Errorf("request URLs (-want +got):\n%s", diff)
	}
	var body map[string]any
	if err := json.Unmarshal(f.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["max_completion_tokens"] != 2048.0 || body["max_tokens"] != nil {
		t.Errorf("output cap: max_completion_tokens %v, max_tokens %v; want 2048 and absent", body["max_completion_tokens"], body["max_tokens"])
	}
	// A request's own cap below the choice's (a hook's run_inference) is the one sent.
	req := openAITask("sum 2 3")
	req.MaxOutputTokens = 64
	if _, err := d.Infer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	body = nil
	if err := json.Unmarshal(f.requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["max_completion_tokens"] != 64.0 {
		t.Errorf("output cap with the request's own: max_completion_tokens %v, want 64", body["max_completion_tokens"])
	}
	if _, ok := body["messages"].([]any)[0].(map[string]any)["role"]; !ok {
		t.Errorf("messages malformed: %v", body["messages"])
	}
}

func TestOpenAIToolCallArguments(t *testing.T) {
	tests := []struct {
		name      string
		arguments string // as the response carries them
		input     string // ToolCall.Input
	}{
		{"object", `"{\"path\":\"a.txt\"}"`, `{"path":"a.txt"}`},
		{"not JSON", `"{\"path\": \"a.txt\""`, `"{\"path\": \"a.txt\""`},
		{"empty", `""`, `{}`},
		{"an object, not a string", `{"path":"a.txt"}`, `{"path":"a.txt"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"id":"chatcmpl-1","object":"chat.completion","created":1753193455,"model":"gpt-4.1-mini",` +
				`"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_1","type":"function","function":{"name":"read-file","arguments":` + tt.arguments + `}}]},"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
			f := newOpenAIFake(t, openAIAnswer{Body: body}, openAIAnswer{Fixture: "text.json"})
			d, _ := newOpenAITestDriver(t, f, nil)
			req := openAITask("read a.txt")
			resp, err := d.Infer(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Calls) != 1 || string(resp.Calls[0].Input) != tt.input {
				t.Fatalf("calls = %+v, want one with input %s", resp.Calls, tt.input)
			}
			if !json.Valid(resp.Calls[0].Input) {
				t.Errorf("input %s is not JSON", resp.Calls[0].Input)
			}
			// The next turn sends the call back with the arguments the model wrote.
			req.Messages = append(req.Messages,
				ChatMessage{Role: RoleAssistant, Calls: resp.Calls},
				ChatMessage{Role: RoleTool, Results: []ToolResult{{CallID: "call_1", Text: "error"}}})
			if _, err := d.Infer(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Messages []struct {
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(f.requests()[1].Body, &sent); err != nil {
				t.Fatal(err)
			}
			var wantArgs string
			if err := json.Unmarshal([]byte(tt.arguments), &wantArgs); err != nil {
				wantArgs = tt.arguments // sent as an object: it goes back as its text
			}
			if wantArgs == "" {
				wantArgs = "{}"
			}
			if got := sent.Messages[2].ToolCalls[0].Function.Arguments; got != wantArgs {
				t.Errorf("arguments sent back = %q, want %q", got, wantArgs)
			}
		})
	}
}

func TestOpenAIResponseOddities(t *testing.T) {
	tests := []struct {
		name string
		body string
		want InferResponse
		err  string
	}{
		{
			name: "refusal",
			body: `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":6,"total_tokens":16}}`,
			want: InferResponse{Text: "I can't help with that.", Usage: Usage{Input: 10, Output: 6, Reported: true, CacheReported: true}},
		},
		{
			name: "call without id",
			body: `{"id":"chatcmpl-3","object":"chat.completion","created":1,"model":"llama3.2","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"expr","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":6,"total_tokens":16}}`,
			want: InferResponse{Calls: []ToolCall{{ID: "call_1_1", Name: "expr", Input: json.RawMessage(`{}`)}}, Usage: Usage{Input: 10, Output: 6, Reported: true, CacheReported: true}},
		},
		{
			name: "no choice",
			body: `{"id":"chatcmpl-4","object":"chat.completion","created":1,"model":"gpt-4.1-mini","choices":[]}`,
			err:  "openai choice gpt (model gpt-4.1-mini at http://127.0.0.1",
		},
		{
			name: "cut off before any answer",
			body: `{"id":"chatcmpl-5","object":"chat.completion","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":16,"total_tokens":26}}`,
			err:  "finish_reason length",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOpenAIFake(t, openAIAnswer{Body: tt.body})
			d, _ := newOpenAITestDriver(t, f, nil)
			got, err := d.Infer(t.Context(), openAITask("sum 2 3"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAICanceled(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Infer(ctx, openAITask("sum 2 3")); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestNewOpenAIDriverRefuses(t *testing.T) {
	getenv := func(string) string { return "" }
	tests := []struct {
		name string
		ch   capsule.Choice
		want string
	}{
		{"no model", capsule.Choice{Driver: capsule.DriverOpenAI, Credential: "env:OPENAI_API_KEY"}, "openai choice gpt names no model"},
		{"no credential for the OpenAI API", capsule.Choice{Driver: capsule.DriverOpenAI, Model: "gpt-4.1-mini"}, "add credential: env:OPENAI_API_KEY"},
		{"base_url not http", capsule.Choice{Driver: capsule.DriverOpenAI, Model: "m", BaseURL: "ftp://example.test/v1"}, "base_url is not an http or https URL"},
		{"another driver", capsule.Choice{Driver: capsule.DriverAnthropic, Model: "claude-sonnet-4-5", Credential: "env:ANTHROPIC_API_KEY"}, `uses driver "anthropic"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOpenAI("gpt", tt.ch, nil, getenv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	// A local server needs no credential, and nil hc is allowed.
	if _, err := NewOpenAI("local", capsule.Choice{Driver: capsule.DriverOpenAI, Model: "llama3.2", BaseURL: "http://127.0.0.1:11434/v1"}, nil, getenv); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAIBadToolSchema(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	req := openAITask("sum 2 3")
	req.Tools = []ToolSpec{{Name: "expr", InputSchema: json.RawMessage(`["not", "an", "object"]`)}}
	_, err := d.Infer(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "tool expr: its input schema is not a JSON object") {
		t.Fatalf("error = %v, want one naming the tool's schema", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestOpenAIConcurrent(t *testing.T) {
	f := newOpenAIFake(t, openAIAnswer{Fixture: "text.json"})
	d, _ := newOpenAITestDriver(t, f, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if resp, err := d.Infer(t.Context(), openAITask("sum 2 3")); err != nil || resp.Text != "2 + 3 = 5" {
				t.Errorf("Infer = %+v, %v", resp, err)
			}
		})
	}
	wg.Wait()
	if n := len(f.requests()); n != 8 {
		t.Errorf("%d requests, want 8", n)
	}
}
