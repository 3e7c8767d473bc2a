//go:build !offline

package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/murmur-run/murmur/member/capsule"
)

const (
	// anthropicDefaultMaxTokens is max_tokens, which the Messages API requires, for a choice without
	// max_output_tokens.
	anthropicDefaultMaxTokens = 4096
	// anthropicMaxRetries bounds the SDK's own retries of 408, 409, 429, 5xx (529 overloaded among
	// them) and connection errors: three attempts in all, then the loop sees the provider's answer.
	anthropicMaxRetries = 2
	// anthropicMaxRetryDelay is the longest wait the driver accepts between attempts. A provider that
	// asks for more (retry-after) is reported at once instead of holding the task silently.
	anthropicMaxRetryDelay = 20 * time.Second
)

// anthropicIDRE is what the Messages API accepts as a tool_use id.
var anthropicIDRE = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// AnthropicDriver serves one inference choice with driver: anthropic through the Messages API: the
// Anthropic API itself, or a server with the same API named by base_url. It is safe for concurrent
// use: it keeps no per-call state.
type AnthropicDriver struct {
	name     string
	ch       capsule.Choice
	endpoint string // the base URL as errors show it, without any userinfo; "" for the default
	getenv   func(string) string
	messages anthropic.MessageService
}

var _ Driver = (*AnthropicDriver)(nil)

// NewAnthropic returns the driver of the choice called name. hc may be nil (then the SDK's
// default client; every attempt is bounded by its own timeout anyway); getenv resolves env:
// credentials. The credential is resolved on every call, so a rotated key works and a missing one
// fails that call with ResolveCredential's message. A choice may go without a credential only when it
// names a base_url (a local server); no x-api-key header is sent then. Nothing is read from
// ANTHROPIC_* variables or profiles: the choice alone says where requests go and with which key.
func NewAnthropic(name string, ch capsule.Choice, hc *http.Client, getenv func(string) string) (*AnthropicDriver, error) {
	if err := checkModelChoice(capsule.DriverAnthropic, "Anthropic", "ANTHROPIC_API_KEY", name, ch, getenv); err != nil {
		return nil, err
	}
	d := &AnthropicDriver{name: name, ch: ch, getenv: getenv}
	// The service, not anthropic.NewClient: NewClient folds ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
	// ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS, ANTHROPIC_PROFILE and the profile files under
	// ~/.config into every request, and a member's requests must go where its capsule says, with the
	// key its capsule names.
	opts := []option.RequestOption{
		option.WithMaxRetries(anthropicMaxRetries),
		option.WithMiddleware(capRetryAfter),
	}
	if hc != nil {
		opts = append(opts, option.WithHTTPClient(hc))
	}
	if ch.BaseURL != "" {
		u, err := url.Parse(ch.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("anthropic choice %s: base_url is not an http or https URL; write the API's base URL, such as base_url: http://127.0.0.1:8080", name)
		}
		d.endpoint = u.Redacted()
		// The SDK appends v1/messages itself; a base_url written the OpenAI way, ending in /v1,
		// would otherwise send every request to /v1/v1/messages.
		u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
		opts = append(opts, option.WithBaseURL(u.String()))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	d.messages = anthropic.NewMessageService(opts...)
	return d, nil
}

// Name is the choice name.
func (d *AnthropicDriver) Name() string { return d.name }

// Infer sends the whole conversation of req as one Messages API call and answers with its text blocks
// and tool_use blocks.
func (d *AnthropicDriver) Infer(ctx context.Context, req InferRequest) (InferResponse, error) {
	return exchange(ctx, req, d.ch.Credential, d.getenv, d.where, d.params, d.send, d.failure, d.response)
}

// send makes the Messages API call.
func (d *AnthropicDriver) send(ctx context.Context, p anthropic.MessageNewParams, key string) (*anthropic.Message, error) {
	var opts []option.RequestOption
	if d.ch.Credential != "" {
		// x-api-key is the header the Messages API documents for API keys. The SDK's WithAPIKey
		// sends the key as a bearer token instead, which Anthropic-compatible servers often refuse.
		opts = append(opts, option.WithHeader("X-Api-Key", key))
	}
	// Without an explicit per-attempt timeout the SDK refuses a non-streaming call whose max_tokens
	// could take more than ten minutes to generate (above about 21,000): such a choice could never
	// be served. The timeout follows the SDK's own estimate of the time the output may take.
	opts = append(opts, option.WithRequestTimeout(anthropicAttemptTimeout(p.MaxTokens)))
	return d.messages.New(ctx, p, opts...)
}

// anthropicAttemptTimeout is how long one attempt may take for an output cap of maxTokens: the SDK's
// estimate (an hour for 128,000 tokens), at least its default of ten minutes and at most an hour.
func anthropicAttemptTimeout(maxTokens int64) time.Duration {
	est := time.Duration(float64(time.Hour) * float64(maxTokens) / 128000)
	return min(max(est, 10*time.Minute), time.Hour)
}

// where names the choice and model, and the endpoint when it is not the Anthropic API, in every
// error of this driver.
func (d *AnthropicDriver) where() string {
	if d.endpoint != "" {
		return fmt.Sprintf("anthropic choice %s (model %s at %s)", d.name, d.ch.Model, d.endpoint)
	}
	return fmt.Sprintf("anthropic choice %s (model %s)", d.name, d.ch.Model)
}

// anthropicTurn is one message being built: the API wants user and assistant messages to alternate,
// so consecutive content of one role goes into one message.
type anthropicTurn struct {
	assistant bool
	blocks    []anthropic.ContentBlockParamUnion
}

func (d *AnthropicDriver) params(req InferRequest) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: d.ch.Model, MaxTokens: anthropicDefaultMaxTokens}
	if n := req.OutputCap(d.ch.MaxOutputTokens); n > 0 {
		p.MaxTokens = int64(n)
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	var turns []anthropicTurn
	add := func(assistant bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			// An empty message is refused by the API; leaving it out lets its neighbours merge.
			return
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, anthropicTurn{assistant: assistant, blocks: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			if hasText(m.Text) {
				add(false, anthropic.NewTextBlock(m.Text))
			}
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if hasText(m.Text) {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(anthropicToolID(c.ID), anthropicInput(c.Input), c.Name))
			}
			add(true, blocks...)
		case RoleTool:
			var blocks []anthropic.ContentBlockParamUnion
			for _, r := range m.Results {
				tr := anthropic.ToolResultBlockParam{ToolUseID: anthropicToolID(r.CallID), IsError: anthropic.Bool(r.Status != "ok")}
				if hasText(r.Text) {
					tr.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: r.Text}}}
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &tr})
			}
			add(false, blocks...)
		default:
			return p, fmt.Errorf("message %d has role %q, which the anthropic driver cannot send", i+1, m.Role)
		}
	}
	if len(turns) == 0 {
		return p, errors.New("the conversation has no message with content to send")
	}
	for _, t := range turns {
		if t.assistant {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(t.blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(t.blocks...))
		}
	}
	for _, t := range req.Tools {
		schema, err := anthropicSchema(t.InputSchema)
		if err != nil {
			return p, fmt.Errorf("tool %s: %v", t.Name, err)
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return p, nil
}

// hasText says whether text may go in a text block: the API refuses empty and whitespace-only ones,
// which an assistant turn without an answer leaves in the conversation.
func hasText(text string) bool { return strings.TrimSpace(text) != "" }

// anthropicSchema is the input_schema of a tool: its manifest's schema as written, or an object
// without properties when it has none. The API takes only object schemas.
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var schema anthropic.ToolInputSchemaParam
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		schema.Properties = map[string]any{}
		return schema, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return schema, errors.New("its input schema is not a JSON object")
	}
	switch typ := obj["type"]; typ {
	case "object":
		param.SetJSON(raw, &schema)
	case nil:
		obj["type"] = "object"
		b, err := json.Marshal(obj)
		if err != nil {
			return schema, err
		}
		param.SetJSON(b, &schema)
	default:
		return schema, fmt.Errorf(`its input schema has type %v; the Messages API takes only "type": "object"`, typ)
	}
	return schema, nil
}

// anthropicInput is the input of a tool_use block the model wrote earlier. The API takes only an
// object: a call made under another driver choice whose input is not one (an OpenAI model's
// arguments that were not JSON) goes back wrapped as {"arguments": …}, so the conversation can still
// be sent after a switch.
func anthropicInput(in json.RawMessage) json.RawMessage {
	s := strings.TrimSpace(string(in))
	if s == "" || s == "null" {
		return json.RawMessage("{}")
	}
	if strings.HasPrefix(s, "{") && json.Valid(in) {
		return in
	}
	var v any = s
	if json.Valid(in) {
		v = json.RawMessage(in)
	}
	b, _ := json.Marshal(map[string]any{"arguments": v})
	return b
}

// anthropicToolID is a call id as the Messages API accepts it: ids made by other drivers may hold
// characters it refuses. The call and its result map alike, so they still pair.
func anthropicToolID(id string) string {
	return anthropicIDRE.ReplaceAllString(id, "_")
}

func (d *AnthropicDriver) response(msg *anthropic.Message, req InferRequest) (InferResponse, error) {
	var resp InferResponse
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			call := ToolCall{ID: b.ID, Name: b.Name, Input: b.Input}
			if strings.TrimSpace(string(call.Input)) == "" || string(call.Input) == "null" {
				call.Input = json.RawMessage("{}")
			}
			if call.ID == "" {
				// The id links the tool_result back to its call; a server that gives none still needs one.
				call.ID = fmt.Sprintf("toolu_%d_%d", req.Turn, i+1)
			}
			resp.Calls = append(resp.Calls, call)
		}
		// thinking, redacted_thinking and server tool blocks carry nothing the loop acts on.
	}
	resp.Text = text.String()
	if resp.Text == "" && len(resp.Calls) == 0 {
		switch msg.StopReason {
		case anthropic.StopReasonMaxTokens:
			return InferResponse{}, fmt.Errorf("the model stopped at max_tokens (%d) before it answered anything; raise max_output_tokens", d.maxTokens(req))
		case anthropic.StopReasonModelContextWindowExceeded:
			return InferResponse{}, errors.New("the model stopped (stop_reason model_context_window_exceeded): the conversation fills its context window")
		case anthropic.StopReasonRefusal:
			return InferResponse{}, errors.New("the model declined to answer (stop_reason refusal)")
		}
	}
	if msg.JSON.Usage.Valid() {
		u := msg.Usage
		resp.Usage = Usage{Input: u.InputTokens, Output: u.OutputTokens, Cached: u.CacheReadInputTokens,
			CacheWrite: u.CacheCreationInputTokens, Reported: true, CacheReported: true, CacheApart: true}
	} else {
		resp.Usage = estimatedUsage(req, resp)
	}
	return resp, nil
}

func (d *AnthropicDriver) maxTokens(req InferRequest) int {
	if n := req.OutputCap(d.ch.MaxOutputTokens); n > 0 {
		return n
	}
	return anthropicDefaultMaxTokens
}

// failure turns an SDK error into one that names the choice and model, and for an answer of the
// provider its status, error type and message. The key is never in it, even when the provider quotes
// it back.
func (d *AnthropicDriver) failure(err error, key string) error {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %w", d.where(), err)
	}
	typ, msg := string(apiErr.Type()), apiErr.Message
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if raw := apiErr.RawJSON(); raw != "" && json.Unmarshal([]byte(raw), &body) == nil {
		typ = cmp.Or(typ, body.Error.Type)
		msg = cmp.Or(msg, body.Error.Message)
	}
	if typ == "" && msg == "" && apiErr.Response != nil && apiErr.Response.Body != nil {
		// Not an Anthropic error object (a proxy's page, a server's plain text): quote its start.
		msg = quoteErrorBody(apiErr.Response.Body)
	}
	msg = redactSecrets(msg, key)
	var b strings.Builder
	b.WriteString(d.where())
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(apiErr.StatusCode))
	if typ != "" {
		b.WriteString(" " + typ)
	} else if t := http.StatusText(apiErr.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if msg != "" {
		b.WriteString(": " + msg)
	}
	if apiErr.Response != nil {
		if wait, ok := retryAfter(apiErr.Response.Header); ok && wait >= time.Second {
			fmt.Fprintf(&b, " (the provider asks to retry after %s)", wait.Round(time.Second))
		}
	}
	if apiErr.RequestID != "" {
		b.WriteString(" (request-id " + apiErr.RequestID + ")")
	}
	return &anthropicError{text: b.String(), err: apiErr}
}

// anthropicError is a provider's error answer. It unwraps to the SDK's *anthropic.Error, whose
// StatusCode and Type tell a rate limit or an overload from a bad request.
type anthropicError struct {
	text string
	err  error
}

func (e *anthropicError) Error() string { return e.text }
func (e *anthropicError) Unwrap() error { return e.err }

// capRetryAfter is SDK middleware that stops the SDK's retries when the provider asks to wait longer
// than anthropicMaxRetryDelay: the SDK would otherwise sleep as long as retry-after says.
func capRetryAfter(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil {
		if wait, ok := retryAfter(res.Header); ok && wait > anthropicMaxRetryDelay {
			res.Header.Set("X-Should-Retry", "false")
		}
	}
	return res, err
}

// retryAfter is the wait a response asks for, read as the SDK reads it: retry-after-ms, then
// retry-after in seconds or as an HTTP date.
func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return time.Until(t), true
		}
	}
	return 0, false
}
