package wit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Call decodes each request strictly, refuses what is malformed with bad-request: before any function
// runs, answers a function the run was not given not-granted:, and passes a function's refusal word for
// word and any other error as failed:.
func TestCall(t *testing.T) {
	var pulled, inferred []string
	f := Functions{
		Pull: func(_ context.Context, req PullRequest) (json.RawMessage, error) {
			pulled = append(pulled, req.Artifact)
			if req.Artifact == "murmur/delegate-task" {
				return nil, &Refusal{Text: "not-granted: E-CAP-013: delegate-task is reserved"}
			}
			return json.RawMessage(`{"artifact":"` + req.Artifact + `"}`), nil
		},
		Infer: func(_ context.Context, req InferenceRequest) (InferenceAnswer, error) {
			inferred = append(inferred, req.Messages[len(req.Messages)-1].Text)
			if req.MaxOutputTokens == 7 {
				return InferenceAnswer{}, errors.New("the provider answered 500")
			}
			return InferenceAnswer{Text: "yes", Usage: Usage{Input: 3, Output: 1}}, nil
		},
	}
	for _, tc := range []struct {
		name, fn, req string
		funcs         Functions
		want          string
	}{
		{"pull", FnManagePull, `{"artifact":"local/shout"}`, f, `{"artifact":"local/shout"}`},
		{"pull refused", FnManagePull, `{"artifact":"murmur/delegate-task"}`, f, `{"error":"not-granted: E-CAP-013: delegate-task is reserved"}`},
		{"pull unknown key", FnManagePull, `{"artifact":"local/x","version":"1"}`, f, `{"error":"bad-request: the request is not {\"artifact\": \"<scope>/<name>\"}: json: unknown field \"version\""}`},
		{"pull empty", FnManagePull, `{"artifact":" "}`, f, `{"error":"bad-request: manage_pull needs {\"artifact\": \"<scope>/<name>\"}, such as {\"artifact\": \"local/tool-edit\"}"}`},
		{"pull not given", FnManagePull, `{"artifact":"local/shout"}`, Functions{}, `{"error":"not-granted: manage.pull is for a tool artifact, within the call the agent made of it"}`},
		{"infer", FnRunInference, `{"messages":[{"role":"user","text":"safe?"}]}`, f, `{"text":"yes","usage":{"input":3,"output":1}}`},
		{"infer failed", FnRunInference, `{"messages":[{"role":"user","text":"x"}],"max_output_tokens":7}`, f, `{"error":"failed: the provider answered 500"}`},
		{"infer no user", FnRunInference, `{"messages":[{"role":"system","text":"x"}]}`, f, `{"error":"bad-request: run_inference needs a message with role user: it is what the model answers"}`},
		{"infer bad role", FnRunInference, `{"messages":[{"role":"tool","text":"x"}]}`, f, `{"error":"bad-request: messages[0].role is \"tool\"; write system, user or assistant"}`},
		{"infer no messages", FnRunInference, `{}`, f, `{"error":"bad-request: run_inference needs at least one message, such as {\"messages\": [{\"role\": \"user\", \"text\": \"…\"}]}"}`},
		{"infer negative cap", FnRunInference, `{"messages":[{"role":"user","text":"x"}],"max_output_tokens":-1}`, f, `{"error":"bad-request: max_output_tokens is -1; write a positive number, or leave it out for the driver choice's own cap"}`},
		{"infer two values", FnRunInference, `{"messages":[{"role":"user","text":"x"}]} {}`, f, `{"error":"bad-request: the request holds more than one JSON value; send one object, {\"messages\": [{\"role\": \"user\", \"text\": \"…\"}], \"max_output_tokens\": 200}"}`},
		{"infer not given", FnRunInference, `{"messages":[{"role":"user","text":"x"}]}`, Functions{}, `{"error":"not-granted: run_inference is for hook artifacts"}`},
		{"unknown function", "bogus", `{}`, f, `{"error":"bad-request: bogus is not a function of the host module murmur; it has manage_pull and run_inference"}`},
		{"too large", FnRunInference, `{"messages":[{"role":"user","text":"` + strings.Repeat("x", MaxRequest) + `"}]}`, f, `{"error":"bad-request: the request is 1048616 bytes, more than the 1048576 a request may be"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(pulled) + len(inferred)
			got := string(tc.funcs.Call(context.Background(), tc.fn, []byte(tc.req)))
			if got != tc.want {
				t.Errorf("answer\n %s\nwant\n %s", got, tc.want)
			}
			ran := len(pulled)+len(inferred) > n
			if strings.HasPrefix(tc.want, `{"error":"bad-request`) && ran {
				t.Error("a function ran for a malformed request")
			}
		})
	}
}

// Answer reads an answer as a guest does: a refusal is a *Refusal with the whole text.
func TestAnswer(t *testing.T) {
	if data, err := Answer([]byte(`{"artifact":"local/shout"}`)); err != nil || string(data) != `{"artifact":"local/shout"}` {
		t.Errorf("Answer of data: %s, %v", data, err)
	}
	_, err := Answer([]byte(`{"error":"over-limit: the task used all 1 turns of inference.max_turns; run_inference made no call"}`))
	var r *Refusal
	if !errors.As(err, &r) || r.Text != "over-limit: the task used all 1 turns of inference.max_turns; run_inference made no call" {
		t.Errorf("Answer of a refusal: %v", err)
	}
}
