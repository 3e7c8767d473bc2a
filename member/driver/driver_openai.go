//go:build !offline

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/murmur-run/murmur/member/capsule"
)

// openAIDefaultBaseURL is where a choice without base_url goes: the SDK's production environment.
const openAIDefaultBaseURL = "https://api.openai.com/v1"

const (
	// openAIMaxRetries bounds the SDK's own retries of 429, 408, 409, 5xx and connection errors: three
	// attempts in all, then the loop sees the provider's answer.
	openAIMaxRetries = 2
	// openAIMaxRetryDelay is the longest wait the driver accepts between attempts. A provider that asks
	// for more (Retry-After) is reported at once instead of holding the task silently.
	openAIMaxRetryDelay = 20 * time.Second
)

// OpenAIDriver serves one inference choice with driver: openai through the Chat Completions API: the
// OpenAI API itself, or any OpenAI-compatible server named by base_url (Ollama, vLLM, llama.cpp). It is
// safe for concurrent use: it keeps no per-call state.
type OpenAIDriver struct {
	name     string
	ch       capsule.Choice
	endpoint string // the base URL as errors show it, without any userinfo
	getenv   func(string) string
	// completionTokens says whether the output cap goes in max_completion_tokens (the OpenAI API,
	// which rejects max_tokens for reasoning models) or max_tokens (what OpenAI-compatible servers
	// have understood the longest).
	completionTokens bool
	chat             openai.ChatCompletionService
}

var _ Driver = (*OpenAIDriver)(nil)

// NewOpenAI returns the driver of the choice called name. hc may be nil (then a client like
// http.DefaultClient with a response-header timeout); getenv resolves env: credentials. The credential
// is resolved on every call, so a rotated key works and a missing one fails that call with
// ResolveCredential's message. A choice may go without a credential only when it names a base_url (a
// local server); no Authorization header is sent then. Nothing is read from OPENAI_* variables: the
// choice alone says where requests go and with which key.
func NewOpenAI(name string, ch capsule.Choice, hc *http.Client, getenv func(string) string) (*OpenAIDriver, error) {
	if err := checkModelChoice(capsule.DriverOpenAI, "OpenAI", "OPENAI_API_KEY", name, ch, getenv); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = defaultOpenAIHTTPClient()
	}
	d := &OpenAIDriver{name: name, ch: ch, getenv: getenv, endpoint: openAIDefaultBaseURL, completionTokens: true}
	// The service, not openai.NewClient: NewClient folds OPENAI_API_KEY, OPENAI_BASE_URL,
	// OPENAI_ADMIN_KEY, … from the process environment into every request, and a member's requests
	// must go where its capsule says, with the key its capsule names.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(openAIMaxRetries),
		option.WithMaxRetryDelay(openAIMaxRetryDelay),
	}
	if ch.BaseURL != "" {
		u, err := url.Parse(ch.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openai choice %s: base_url is not an http or https URL; write the API's base URL, such as base_url: http://127.0.0.1:11434/v1", name)
		}
		d.endpoint = u.Redacted()
		d.completionTokens = strings.EqualFold(u.Hostname(), "api.openai.com")
		opts = append(opts, option.WithBaseURL(ch.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	d.chat = openai.NewChatCompletionService(opts...)
	return d, nil
}

// defaultOpenAIHTTPClient is http.DefaultClient's transport with the SDK's own guard against a server
// that accepts the request and never answers; the task's context still bounds the whole call.
func defaultOpenAIHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// Name is the choice name.
func (d *OpenAIDriver) Name() string { return d.name }

// Infer sends the whole conversation of req as one Chat Completions call and answers with the first
// choice's text and tool calls.
func (d *OpenAIDriver) Infer(ctx context.Context, req InferRequest) (InferResponse, error) {
	return exchange(ctx, req, d.ch.Credential, d.getenv, d.where, d.params, d.send, d.failure, d.response)
}

// send makes the Chat Completions call. An empty key makes the SDK send no Authorization header at all,
// which is what a local server without authentication expects.
func (d *OpenAIDriver) send(ctx context.Context, p openai.ChatCompletionNewParams, key string) (*openai.ChatCompletion, error) {
	return d.chat.New(ctx, p, option.WithAPIKey(key))
}

// where names the choice, model and endpoint in every error of this driver.
func (d *OpenAIDriver) where() string {
	return fmt.Sprintf("openai choice %s (model %s at %s)", d.name, d.ch.Model, d.endpoint)
}

func (d *OpenAIDriver) params(req InferRequest) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: d.ch.Model}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(m.Text))
		case RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			// content may be left out only when there are tool calls.
			if m.Text != "" || len(m.Calls) == 0 {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: openAIArguments(c.Input)},
					},
				})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case RoleTool:
			for _, r := range m.Results {
				p.Messages = append(p.Messages, openai.ToolMessage(r.Text, r.CallID))
			}
		default:
			return p, fmt.Errorf("message %d has role %q, which the openai driver cannot send", i+1, m.Role)
		}
	}
	for _, t := range req.Tools {
		var params openai.FunctionParameters
		if s := strings.TrimSpace(string(t.InputSchema)); s != "" && s != "null" {
			if err := json.Unmarshal(t.InputSchema, &params); err != nil {
				return p, fmt.Errorf("tool %s: its input schema is not a JSON object: %v", t.Name, err)
			}
		}
		if len(params) == 0 {
			// A tool without parameters still needs an object schema: servers differ on a missing one.
			params = openai.FunctionParameters{"type": "object", "properties": map[string]any{}}
		}
		fn := openai.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if n := int64(req.OutputCap(d.ch.MaxOutputTokens)); n > 0 {
		if d.completionTokens {
			p.MaxCompletionTokens = openai.Int(n)
		} else {
			p.MaxTokens = openai.Int(n)
		}
	}
	return p, nil
}

// openAIArguments is the arguments string of a call the model made earlier. Input that response made a
// JSON string (the model's arguments were not JSON) goes back as the model wrote it.
func openAIArguments(in json.RawMessage) string {
	if len(in) == 0 {
		return "{}"
	}
	var s string
	if in[0] == '"' && json.Unmarshal(in, &s) == nil {
		return s
	}
	return string(in)
}

func (d *OpenAIDriver) response(cc *openai.ChatCompletion, req InferRequest) (InferResponse, error) {
	if len(cc.Choices) == 0 {
		return InferResponse{}, errors.New("the response carried no choice")
	}
	choice := cc.Choices[0]
	msg := choice.Message
	resp := InferResponse{Text: msg.Content}
	if resp.Text == "" && len(msg.ToolCalls) == 0 {
		resp.Text = msg.Refusal
	}
	for i, tc := range msg.ToolCalls {
		call := ToolCall{ID: tc.ID}
		switch tc.Type {
		case "function", "": // some compatible servers leave type out
			call.Name = tc.Function.Name
			call.Input = openAIInput(tc.Function.Arguments, tc.Function.JSON.Arguments.Raw())
		case "custom":
			call.Name = tc.Custom.Name
			call.Input, _ = json.Marshal(tc.Custom.Input)
		default:
			return InferResponse{}, fmt.Errorf("tool call %d has type %q, which the openai driver does not know", i+1, tc.Type)
		}
		if call.ID == "" {
			// The id links the tool message back to its call; a server that gives none still needs one.
			call.ID = fmt.Sprintf("call_%d_%d", req.Turn, i+1)
		}
		resp.Calls = append(resp.Calls, call)
	}
	if resp.Text == "" && len(resp.Calls) == 0 && (choice.FinishReason == "length" || choice.FinishReason == "content_filter") {
		return InferResponse{}, fmt.Errorf("the model stopped (finish_reason %s) before it answered anything", choice.FinishReason)
	}
	if cc.JSON.Usage.Valid() {
		u := cc.Usage
		resp.Usage = Usage{Input: u.PromptTokens, Output: u.CompletionTokens, Cached: u.PromptTokensDetails.CachedTokens,
			CacheWrite: u.PromptTokensDetails.CacheWriteTokens, Reported: true, CacheReported: true}
	} else {
		resp.Usage = estimatedUsage(req, resp)
	}
	return resp, nil
}

// openAIInput is the Input of a tool call from its arguments. Arguments that are not JSON are passed on
// as a JSON string rather than failing the inference: the tool then refuses the input and the model
// sees why and can call again, where an error would end the whole task over one malformed call. Empty
// arguments (a tool without parameters, on some servers) are {}; a server that sends the arguments as
// an object instead of a string has them taken as they are.
func openAIInput(args, raw string) json.RawMessage {
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return json.RawMessage(raw)
	}
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

// failure turns an SDK error into one that names the choice, model and endpoint, and for an answer of
// the provider its status and message. The key is never in it, even when the provider quotes it back.
func (d *OpenAIDriver) failure(err error, key string) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %w", d.where(), err)
	}
	status := fmt.Sprintf("%d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
	msg := apiErr.Message
	if msg == "" && apiErr.Response != nil && apiErr.Response.Body != nil {
		// Not an OpenAI error object (a proxy's page, a server's plain text): quote its start.
		msg = quoteErrorBody(apiErr.Response.Body)
	}
	msg = redactSecrets(msg, key)
	text := d.where() + ": " + strings.TrimSpace(status)
	if msg != "" {
		text += ": " + msg
	}
	return &openAIError{text: text, err: apiErr}
}

// openAIError is a provider's error answer. It unwraps to the SDK's *openai.Error, whose StatusCode
// tells a rate limit from a bad request.
type openAIError struct {
	text string
	err  error
}

func (e *openAIError) Error() string { return e.text }
func (e *openAIError) Unwrap() error { return e.err }
