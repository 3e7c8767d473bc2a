//go:build !offline

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
)

// The fixtures under testdata/anthropic are Messages API answers in the shapes the API sends: text.json
// and tool_use.json follow the examples of the Messages and tool use docs, the error bodies the
// "Error shapes" of the errors docs, and no_usage.json the bare message of the SDK's own tests (an
// Anthropic-compatible server may leave usage out). conversation_request.json is the request body
// TestAnthropicConversationRequest expects.

const anthropicTestKey = "sk-ant-api03-Zq7Xk2LmP9vBn4cRt8YwJ0pHs6DgAe1-test-KEYxyzAA"

// The fake Messages API server: a providerFake serving testdata/anthropic.
type (
	anthropicRequest = fakeRequest
	anthropicAnswer  = fakeAnswer
	anthropicFake    = providerFake
)

func newAnthropicFake(t *testing.T, answers ...anthropicAnswer) *anthropicFake {
	t.Helper()
	return newProviderFake(t, "anthropic", answers...)
}

func anthropicFixture(t *testing.T, name string) []byte {
	t.Helper()
	return providerFixture(t, "anthropic", name)
}

// anthropicEnv is a getenv whose variables a test may change between calls.
type anthropicEnv = testEnv

// newAnthropicTestDriver is the driver of choice claude on the fake server, its key in
// MUR_TEST_ANTHROPIC_KEY.
func newAnthropicTestDriver(t *testing.T, f *anthropicFake, edit func(*capsule.Choice)) (*AnthropicDriver, *anthropicEnv) {
	t.Helper()
	env := &anthropicEnv{vars: map[string]string{"MUR_TEST_ANTHROPIC_KEY": anthropicTestKey}}
	ch := capsule.Choice{Driver: capsule.DriverAnthropic, Model: "claude-sonnet-4-5", BaseURL: f.URL, Credential: "env:MUR_TEST_ANTHROPIC_KEY"}
	if edit != nil {
		edit(&ch)
	}
	d, err := NewAnthropic("claude", ch, f.Client(), env.getenv)
	if err != nil {
		t.Fatal(err)
	}
	return d, env
}

func anthropicTask(text string) InferRequest {
	return InferRequest{System: "You are a worker.", Messages: []ChatMessage{{Role: RoleUser, Text: text}}, Turn: 1, Task: text}
}

// anthropicBody is the JSON of the request body the fake server saw.
func anthropicBody(t *testing.T, r anthropicRequest) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.Body)
	}
	return body
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestAnthropicTextAnswer(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	if d.Name() != "claude" {
		t.Errorf("Name() = %q, want claude", d.Name())
	}
	got, err := d.Infer(t.Context(), anthropicTask("sum 2 3"))
	if err != nil {
		t.Fatal(err)
	}
	want := InferResponse{
		Text:  "2 + 3 is 5.",
		Usage: Usage{Input: 2095, Output: 503, Cached: 4096, CacheWrite: 1024, Reported: true, CacheReported: true, CacheApart: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1/messages" {
		t.Fatalf("requests %+v, want one POST /v1/messages", reqs)
	}
}

func TestAnthropicToolUseAnswer(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "tool_use.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	got, err := d.Infer(t.Context(), anthropicTask("sum 2 3"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "I'll add the two numbers." {
		t.Errorf("Text = %q", got.Text)
	}
	if len(got.Calls) != 1 {
		t.Fatalf("Calls = %+v, want one", got.Calls)
	}
	c := got.Calls[0]
	if c.ID != "toolu_01A09q90qw90lq917835lq9" || c.Name != "expr" {
		t.Errorf("call id %q name %q, want toolu_01A09q90qw90lq917835lq9 and expr", c.ID, c.Name)
	}
	if in := compactJSON(t, c.Input); in != `{"args":["2","+","3"]}` {
		t.Errorf("call input %s", in)
	}
	if diff := cmp.Diff(Usage{Input: 472, Output: 91, Reported: true, CacheReported: true, CacheApart: true}, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestAnthropicConversationRequest checks the whole body sent for a conversation of several turns
// against testdata/anthropic/conversation_request.json, and the request's headers: alternating roles,
// tool results in one user message with the nudge after them, the blank assistant turn (a turn that
// ended without an answer) left out.
func TestAnthropicConversationRequest(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, func(ch *capsule.Choice) { ch.MaxOutputTokens = 512 })
	req := InferRequest{
		System: "You are a worker. Answer arithmetic questions.",
		Messages: []ChatMessage{
			{Role: RoleUser, Text: Fence("task", "sum 2 3 and tell me the session status", "")},
			{Role: RoleAssistant, Text: "I will compute it and look at the session.", Calls: []ToolCall{
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "expr", Input: json.RawMessage(`{"args":["2","+","3"]}`)},
				{ID: "call_b", Name: "session-status", Input: json.RawMessage(`{}`)},
			}},
			{Role: RoleTool, Results: []ToolResult{
				{CallID: "toolu_01A09q90qw90lq917835lq9", Tool: "expr", Status: "ok", Output: "5", Text: Fence("tool:expr", "5", "")},
				{CallID: "call_b", Tool: "session-status", Status: "ok", Output: `{"turns":{"used":1}}`,
					Text: Fence("tool:session-status", `{"turns":{"used":1}}`, "note: the deadline is in 2h")},
			}},
			{Role: RoleAssistant, Calls: []ToolCall{{ID: "call_2_1", Name: "read-file", Input: json.RawMessage(`{"path":"out/x"}`)}}},
			{Role: RoleTool, Results: []ToolResult{
				{CallID: "call_2_1", Tool: "read-file", Status: "refused", Output: "not staged", Text: "read-file is not staged for this session"},
			}},
			{Role: RoleAssistant, Text: " \n"},
			{Role: RoleUser, Text: "[runtime] You ended your turn without an answer. Keep working on the task, and end your turn with your answer as text when you have it."},
		},
		Tools: []ToolSpec{
			{Name: "expr", Description: "Evaluates an arithmetic expression.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"args":{"type":"array","items":{"type":"string"}}},"required":["args"]}`)},
			{Name: "session-status", Description: "Reports the session's time, turns, context, tokens and spend."},
		},
		Turn: 4,
		Task: "sum 2 3 and tell me the session status",
	}
	if _, err := d.Infer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	h := reqs[0].Header
	if got := h.Get("X-Api-Key"); got != anthropicTestKey {
		t.Errorf("x-api-key = %q, want the key of MUR_TEST_ANTHROPIC_KEY", got)
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none: the key goes in x-api-key", got)
	}
	if v := h.Get("Anthropic-Version"); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(v) {
		t.Errorf("anthropic-version = %q, want the API version date the SDK speaks", v)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var want any
	if err := json.Unmarshal(anthropicFixture(t, "conversation_request.json"), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, any(anthropicBody(t, reqs[0]))); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestAnthropicProviderErrors(t *testing.T) {
	// retry-after-ms: 1 keeps the SDK's retries (of 429 and 5xx, twice) from taking time.
	quick := map[string]string{"Retry-After-Ms": "1", "Request-Id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
	tests := []struct {
		name     string
		answer   anthropicAnswer
		requests int
		status   int
		want     []string
	}{
		{
			name:     "rate limit",
			answer:   anthropicAnswer{Status: 429, Header: quick, Fixture: "rate_limit.json"},
			requests: 3,
			status:   429,
			want: []string{
				"anthropic choice claude (model claude-sonnet-4-5 at http://127.0.0.1:",
				"): 429 rate_limit_error: This request would exceed the rate limit for your organization of 50,000 input tokens per minute.",
				"(request-id req_011CSHoEeqs5C35K2UUqR7Fy)",
			},
		},
		{
			name:     "overloaded",
			answer:   anthropicAnswer{Status: 529, Header: quick, Fixture: "overloaded.json"},
			requests: 3,
			status:   529,
			want:     []string{"anthropic choice claude (model claude-sonnet-4-5", "): 529 overloaded_error: Overloaded"},
		},
		{
			name:     "invalid request",
			answer:   anthropicAnswer{Status: 400, Fixture: "invalid_request.json"},
			requests: 1,
			status:   400,
			want:     []string{"): 400 invalid_request_error: messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x."},
		},
		{
			name:     "authentication",
			answer:   anthropicAnswer{Status: 401, Fixture: "authentication.json"},
			requests: 1,
			status:   401,
			want:     []string{"): 401 authentication_error: invalid x-api-key"},
		},
		{
			// A provider that asks to wait longer than the driver accepts is reported at once.
			name:     "rate limit with a long retry-after",
			answer:   anthropicAnswer{Status: 429, Header: map[string]string{"Retry-After": "60"}, Fixture: "rate_limit.json"},
			requests: 1,
			status:   429,
			want:     []string{"429 rate_limit_error: This request", "(the provider asks to retry after 1m0s)"},
		},
		{
			// A proxy in front of the API answers with its own page, quoting the key it was sent.
			name: "proxy page",
			answer: anthropicAnswer{Status: 502, Header: quick, ContentType: "text/html",
				Body: "<html><body>bad gateway for key " + anthropicTestKey + "</body></html>"},
			requests: 3,
			status:   502,
			want:     []string{"): 502 Bad Gateway: <html><body>bad gateway for key [credential]</body></html>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newAnthropicFake(t, tt.answer)
			d, _ := newAnthropicTestDriver(t, f, nil)
			_, err := d.Infer(t.Context(), anthropicTask("sum 2 3"))
			if err == nil {
				t.Fatal("Infer succeeded, want an error")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "retry after 0s") {
				t.Errorf("error names a wait the SDK already made: %s", msg)
			}
			if strings.Contains(msg, anthropicTestKey) || strings.Contains(msg, anthropicTestKey[:20]) {
				t.Errorf("error shows the key: %s", msg)
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Errorf("error does not unwrap to the SDK's error with status %d: %#v", tt.status, err)
			}
			if n := len(f.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

// TestAnthropicCredentialResolvedOnEveryCall: a missing variable fails the call before any request,
// naming the variable; once it is set the next call goes through with it.
func TestAnthropicCredentialResolvedOnEveryCall(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, env := newAnthropicTestDriver(t, f, nil)
	env.set("MUR_TEST_ANTHROPIC_KEY", "")
	_, err := d.Infer(t.Context(), anthropicTask("sum 2 3"))
	if err == nil {
		t.Fatal("Infer succeeded without the credential")
	}
	for _, w := range []string{"anthropic choice claude (model claude-sonnet-4-5", "credential env:MUR_TEST_ANTHROPIC_KEY", "MUR_TEST_ANTHROPIC_KEY is not set"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests made without a credential, want none", n)
	}
	env.set("MUR_TEST_ANTHROPIC_KEY", "sk-ant-rotated")
	if _, err := d.Infer(t.Context(), anthropicTask("sum 2 3")); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Header.Get("X-Api-Key"); got != "sk-ant-rotated" {
		t.Errorf("x-api-key = %q, want the rotated key", got)
	}
}

func TestAnthropicNoUsageIsEstimated(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "no_usage.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	req := anthropicTask("hello")
	got, err := d.Infer(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{Input: EstimateInput(req), Output: EstimateTokens("echo: hello"), Estimated: true}
	if diff := cmp.Diff(want, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got.Text != "echo: hello" {
		t.Errorf("Text = %q", got.Text)
	}
}

func TestAnthropicMaxTokens(t *testing.T) {
	for _, tt := range []struct {
		name string
		max  int
		req  int // the request's own cap (a hook's run_inference)
		want float64
	}{
		{"default", 0, 0, 4096},
		{"choice", 1024, 0, 1024},
		// Past what the SDK lets a non-streaming call ask for without a timeout of its own.
		{"large", 64000, 0, 64000},
		{"request below the choice", 1024, 100, 100},
		{"request above the choice", 1024, 5000, 1024},
		{"request without a choice cap", 0, 300, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
			d, _ := newAnthropicTestDriver(t, f, func(ch *capsule.Choice) { ch.MaxOutputTokens = tt.max })
			req := anthropicTask("sum 2 3")
			req.MaxOutputTokens = tt.req
			if _, err := d.Infer(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if got := anthropicBody(t, f.requests()[0])["max_tokens"]; got != tt.want {
				t.Errorf("max_tokens = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAnthropicStoppedWithoutAnswer(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "max_tokens_empty.json"})
	d, _ := newAnthropicTestDriver(t, f, func(ch *capsule.Choice) { ch.MaxOutputTokens = 16 })
	_, err := d.Infer(t.Context(), anthropicTask("sum 2 3"))
	if err == nil || !strings.Contains(err.Error(), "stopped at max_tokens (16)") || !strings.Contains(err.Error(), "max_output_tokens") {
		t.Errorf("error %v, want one naming max_tokens and max_output_tokens", err)
	}
}

// anthropicRedirect sends every request to a loopback server, recording the URL it was meant for.
type anthropicRedirect struct {
	to   *url.URL
	next http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (r *anthropicRedirect) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, ""
	return r.next.RoundTrip(req)
}

// TestAnthropicEndpoints: a choice without base_url goes to the Anthropic API (here redirected to
// loopback by the transport), and none of the SDK's ANTHROPIC_* variables steer it; a base_url
// written with /v1 still reaches /v1/messages.
func TestAnthropicEndpoints(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1/elsewhere")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-process-environment")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	to, _ := url.Parse(f.URL)
	for _, tt := range []struct {
		baseURL string
		want    string
	}{
		{"", "https://api.anthropic.com/v1/messages"},
		{"http://llm.internal:8080/v1", "http://llm.internal:8080/v1/messages"},
		{"http://llm.internal:8080/anthropic/", "http://llm.internal:8080/anthropic/v1/messages"},
	} {
		rt := &anthropicRedirect{to: to, next: f.Client().Transport}
		env := map[string]string{"ANTHROPIC_API_KEY": anthropicTestKey}
		ch := capsule.Choice{Driver: capsule.DriverAnthropic, Model: "claude-sonnet-4-5", BaseURL: tt.baseURL, Credential: "env:ANTHROPIC_API_KEY"}
		d, err := NewAnthropic("claude", ch, &http.Client{Transport: rt}, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Infer(t.Context(), anthropicTask("sum 2 3")); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{tt.want}, rt.urls); diff != "" {
			t.Errorf("base_url %q: request URLs (-want +got):\n%s", tt.baseURL, diff)
		}
	}
	for _, r := range f.requests() {
		if got := r.Header.Get("X-Api-Key"); got != anthropicTestKey {
			t.Errorf("x-api-key = %q, want the choice's key", got)
		}
		if r.Header.Get("X-Leak") != "" {
			t.Error("ANTHROPIC_CUSTOM_HEADERS reached the request")
		}
	}
}

func TestAnthropicLocalServerWithoutCredential(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, func(ch *capsule.Choice) { ch.Credential = "" })
	if _, err := d.Infer(t.Context(), anthropicTask("sum 2 3")); err != nil {
		t.Fatal(err)
	}
	h := f.requests()[0].Header
	if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("a credential was sent for a choice without one: x-api-key %q, Authorization %q", h.Get("X-Api-Key"), h.Get("Authorization"))
	}
}

// TestAnthropicCallsOfOtherDrivers: a conversation begun under another driver choice may hold call
// ids and inputs the Messages API refuses; they are sent in a form it takes, call and result alike.
func TestAnthropicCallsOfOtherDrivers(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	req := anthropicTask("sum 2 3")
	req.Messages = append(req.Messages,
		ChatMessage{Role: RoleAssistant, Calls: []ToolCall{
			{ID: "call:1.1", Name: "expr", Input: json.RawMessage(`"2 + 3"`)},
			{ID: "call_2", Name: "expr", Input: json.RawMessage(`not json`)},
			{ID: "call_3", Name: "session-status"},
		}},
		ChatMessage{Role: RoleTool, Results: []ToolResult{
			{CallID: "call:1.1", Status: "error", Text: "bad input"},
			{CallID: "call_2", Status: "error", Text: "bad input"},
			{CallID: "call_3", Status: "ok", Text: "fine"},
		}},
	)
	if _, err := d.Infer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	msgs := anthropicBody(t, f.requests()[0])["messages"].([]any)
	calls := msgs[1].(map[string]any)["content"].([]any)
	results := msgs[2].(map[string]any)["content"].([]any)
	wantInputs := []string{`{"arguments":"2 + 3"}`, `{"arguments":"not json"}`, `{}`}
	wantIDs := []string{"call_1_1", "call_2", "call_3"}
	for i := range calls {
		c, r := calls[i].(map[string]any), results[i].(map[string]any)
		in, _ := json.Marshal(c["input"])
		if string(in) != wantInputs[i] {
			t.Errorf("call %d input %s, want %s", i, in, wantInputs[i])
		}
		if c["id"] != wantIDs[i] || r["tool_use_id"] != wantIDs[i] {
			t.Errorf("call %d id %v, result tool_use_id %v, want %s for both", i, c["id"], r["tool_use_id"], wantIDs[i])
		}
	}
}

func TestAnthropicBadRequests(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	for _, tt := range []struct {
		name string
		req  InferRequest
		want string
	}{
		{"schema not an object", InferRequest{Messages: []ChatMessage{{Role: RoleUser, Text: "x"}},
			Tools: []ToolSpec{{Name: "expr", InputSchema: json.RawMessage(`[1]`)}}}, "tool expr: its input schema is not a JSON object"},
		{"schema not of type object", InferRequest{Messages: []ChatMessage{{Role: RoleUser, Text: "x"}},
			Tools: []ToolSpec{{Name: "expr", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, `tool expr: its input schema has type string`},
		{"unknown role", InferRequest{Messages: []ChatMessage{{Role: "system", Text: "x"}}}, `message 1 has role "system"`},
		{"nothing to send", InferRequest{Messages: []ChatMessage{{Role: RoleUser}}}, "no message with content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Infer(t.Context(), tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "anthropic choice claude") {
				t.Errorf("error %v, want one naming the choice and containing %q", err, tt.want)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests made for requests the driver cannot send, want none", n)
	}
}

func TestAnthropicSchemaWithoutType(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	req := anthropicTask("x")
	req.Tools = []ToolSpec{{Name: "echo", InputSchema: json.RawMessage(`{"properties":{"s":{"type":"string"}}}`)}}
	if _, err := d.Infer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	tool := anthropicBody(t, f.requests()[0])["tools"].([]any)[0].(map[string]any)
	schema, _ := json.Marshal(tool["input_schema"])
	if string(schema) != `{"properties":{"s":{"type":"string"}},"type":"object"}` {
		t.Errorf("input_schema %s", schema)
	}
	if _, ok := tool["description"]; ok {
		t.Errorf("description sent for a tool without one: %v", tool)
	}
}

// TestAnthropicConcurrentCalls: one driver serves several tasks at once (run with -race).
func TestAnthropicConcurrentCalls(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "tool_use.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			resp, err := d.Infer(t.Context(), anthropicTask(strings.Repeat("sum 2 3 ", i+1)))
			if err != nil || len(resp.Calls) != 1 {
				t.Errorf("call %d: %v, %+v", i, err, resp)
			}
		})
	}
	wg.Wait()
	if n := len(f.requests()); n != 8 {
		t.Errorf("%d requests, want 8", n)
	}
}

func TestAnthropicCanceled(t *testing.T) {
	f := newAnthropicFake(t, anthropicAnswer{Fixture: "text.json"})
	d, _ := newAnthropicTestDriver(t, f, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := d.Infer(ctx, anthropicTask("sum 2 3"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestNewAnthropicDriverRefuses(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, tt := range []struct {
		name string
		ch   capsule.Choice
		want string
	}{
		{"other driver", capsule.Choice{Driver: capsule.DriverOpenAI, Model: "m", Credential: "env:K"}, `uses driver "openai"`},
		{"no model", capsule.Choice{Driver: capsule.DriverAnthropic, Credential: "env:K"}, "names no model"},
		{"no credential", capsule.Choice{Driver: capsule.DriverAnthropic, Model: "m"}, "add credential: env:ANTHROPIC_API_KEY"},
		{"bad base_url", capsule.Choice{Driver: capsule.DriverAnthropic, Model: "m", BaseURL: "127.0.0.1:8080"}, "base_url is not an http or https URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAnthropic("claude", tt.ch, nil, getenv)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "anthropic choice claude") {
				t.Errorf("error %v, want one naming the choice and containing %q", err, tt.want)
			}
		})
	}
}
