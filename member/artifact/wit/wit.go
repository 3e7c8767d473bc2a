// Package wit is the wire contract of WIT level 2 (DESIGN §18): what a level-2 artifact may ask of the
// session it runs in, and the answers it gets. Two functions exist:
//
//   - manage_pull, for a tool artifact, within the call the agent made of it: SPEC's manage.pull(),
//     which does exactly what pull-artifact does. Request {"artifact": "scope/name[@version]"}; answer
//     pull-artifact's data ({"artifact", "version", "runtime", "tool_name", "fetched_from"}), or, for a
//     pattern ending in *, its listing.
//   - run_inference, for a hook artifact: one inference call on the session's current driver choice,
//     without tools. Request {"messages": [{"role", "text"}], "max_output_tokens"}; answer {"text",
//     "usage": {"input", "output"}}.
//
// A refusal is the answer {"error": "<token>: <text>"}, the text opening with one token: pull-artifact's
// own for manage_pull (not-granted:, not-found:, does-not-fit:, not-fetched:), and for both not-granted:
// (the function is not this artifact's, or the capsule does not grant it), over-limit: (inference.max_turns
// or inference.max_session_tokens reached), bad-request: (the request is not the object above) and
// failed: (the call was made and failed: the driver's error).
//
// A WebAssembly artifact reaches the functions as imports of the host module "murmur" (package
// member/artifact/wasm; the ABI is in docs/artifacts.md, and package guest is its Go helper); a command
// hook through an HTTP endpoint on a Unix socket its run is given (package member/artifact/wit/endpoint).
// Both hand the request's bytes to Functions.Call, so one decoder and one set of texts serves both.
//
// The package is a leaf (standard library only), so the guest helper, compiled into modules, stays small.
package wit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Module is the name of the host module a level-2 WebAssembly artifact imports its functions from.
const Module = "murmur"

// The functions of the host module. FnAnswer copies an answer that did not fit the buffer its call
// offered (see docs/artifacts.md, "WIT level 2").
const (
	FnManagePull   = "manage_pull"
	FnRunInference = "run_inference"
	FnAnswer       = "answer"
)

// Level is the WIT level that serves these functions; an artifact asking for a higher one does not fit.
const Level = 2

// MaxRequest bounds a request's bytes; a longer one is refused bad-request:.
const MaxRequest = 1 << 20

// The refusal tokens this package writes (manage_pull's other tokens are pull-artifact's).
const (
	TokenNotGranted = "not-granted"
	TokenOverLimit  = "over-limit"
	TokenBadRequest = "bad-request"
	TokenFailed     = "failed"
)

// PullRequest is manage_pull's request.
type PullRequest struct {
	Artifact string `json:"artifact"`
}

// InferenceRequest is run_inference's request.
type InferenceRequest struct {
	Messages []Message `json:"messages"`
	// MaxOutputTokens caps the answer's tokens when more than 0 (and less than the choice's own cap).
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
}

// The roles of a message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of an inference request.
type Message struct {
	Role string `json:"role"` // system, user or assistant
	Text string `json:"text"`
}

// InferenceAnswer is run_inference's answer.
type InferenceAnswer struct {
	Text  string `json:"text"`
	Usage Usage  `json:"usage"`
}

// Usage is what one inference call used, in tokens (a driver's estimate where the provider reports none).
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Refusal is a refused call: Text is the whole answer's error, opening with its token.
type Refusal struct {
	Text string
}

func (r *Refusal) Error() string { return r.Text }

// Refuse returns the refusal "<token>: <text>".
func Refuse(token, text string) *Refusal { return &Refusal{Text: token + ": " + text} }

// Functions is what one run of an artifact may ask: a nil function is refused not-granted:, saying whose
// function it is. A function's error is its refusal: a *Refusal word for word, any other error as failed:.
type Functions struct {
	Pull  func(ctx context.Context, req PullRequest) (json.RawMessage, error)
	Infer func(ctx context.Context, req InferenceRequest) (InferenceAnswer, error)
}

// The refusals of a function the run was not given.
var (
	errNoPull  = Refuse(TokenNotGranted, "manage.pull is for a tool artifact, within the call the agent made of it")
	errNoInfer = Refuse(TokenNotGranted, "run_inference is for hook artifacts")
)

// Call answers one call of function fn with its request's bytes: the answer's JSON, never an error (a
// refusal is an answer). It is what the host module and the command hooks' endpoint both call.
func (f Functions) Call(ctx context.Context, fn string, request []byte) []byte {
	ans, err := f.call(ctx, fn, request)
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) {
			r = Refuse(TokenFailed, err.Error())
		}
		return marshal(struct {
			Error string `json:"error"`
		}{r.Text})
	}
	return ans
}

// marshal is json.Marshal without the escaping of <, > and &, so that an answer reads as written (a
// refusal's "<scope>/<name>", a model's text) in a hook's curl output too. v holds strings and numbers
// only.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings and numbers into a bytes.Buffer: nothing can fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (f Functions) call(ctx context.Context, fn string, request []byte) ([]byte, error) {
	if len(request) > MaxRequest {
		return nil, Refuse(TokenBadRequest, fmt.Sprintf("the request is %d bytes, more than the %d a request may be", len(request), MaxRequest))
	}
	switch fn {
	case FnManagePull:
		var req PullRequest
		if err := decode(request, &req, `{"artifact": "<scope>/<name>"}`); err != nil {
			return nil, err
		}
		if strings.TrimSpace(req.Artifact) == "" {
			return nil, Refuse(TokenBadRequest, `manage_pull needs {"artifact": "<scope>/<name>"}, such as {"artifact": "local/tool-edit"}`)
		}
		if f.Pull == nil {
			return nil, errNoPull
		}
		data, err := f.Pull(ctx, req)
		if err != nil {
			return nil, err
		}
		return data, nil
	case FnRunInference:
		var req InferenceRequest
		if err := decode(request, &req, `{"messages": [{"role": "user", "text": "…"}], "max_output_tokens": 200}`); err != nil {
			return nil, err
		}
		if err := req.Check(); err != nil {
			return nil, err
		}
		if f.Infer == nil {
			return nil, errNoInfer
		}
		ans, err := f.Infer(ctx, req)
		if err != nil {
			return nil, err
		}
		return marshal(ans), nil
	}
	return nil, Refuse(TokenBadRequest, fmt.Sprintf("%s is not a function of the host module %s; it has %s and %s", fn, Module, FnManagePull, FnRunInference))
}

// Check says what is wrong with an inference request: no message, a role that is none of system, user and
// assistant, no user message, or a negative max_output_tokens.
func (r InferenceRequest) Check() error {
	if len(r.Messages) == 0 {
		return Refuse(TokenBadRequest, `run_inference needs at least one message, such as {"messages": [{"role": "user", "text": "…"}]}`)
	}
	user := false
	for i, m := range r.Messages {
		switch m.Role {
		case RoleUser:
			user = true
		case RoleSystem, RoleAssistant:
		default:
			return Refuse(TokenBadRequest, fmt.Sprintf("messages[%d].role is %q; write system, user or assistant", i, m.Role))
		}
	}
	if !user {
		return Refuse(TokenBadRequest, "run_inference needs a message with role user: it is what the model answers")
	}
	if r.MaxOutputTokens < 0 {
		return Refuse(TokenBadRequest, fmt.Sprintf("max_output_tokens is %d; write a positive number, or leave it out for the driver choice's own cap", r.MaxOutputTokens))
	}
	return nil
}

// decode reads one JSON object strictly into v: an unknown key, a second value or another type is a
// bad-request: refusal showing the shape.
func decode(b []byte, v any, shape string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Refuse(TokenBadRequest, fmt.Sprintf("the request is not %s: %v", shape, err))
	}
	if dec.More() {
		return Refuse(TokenBadRequest, fmt.Sprintf("the request holds more than one JSON value; send one object, %s", shape))
	}
	return nil
}

// Answer is an answer as a guest reads it: the error when the call was refused, else the answer's JSON.
func Answer(b []byte) (json.RawMessage, error) {
	var probe struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.Error != nil {
		return nil, &Refusal{Text: *probe.Error}
	}
	return json.RawMessage(b), nil
}
