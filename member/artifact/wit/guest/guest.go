// Package guest is the Go side of WIT level 2 for a WebAssembly artifact built with GOOS=wasip1
// GOARCH=wasm: Pull and Infer call the host module "murmur" (package wit has the requests, answers and
// refusals), passing the request's JSON in the module's memory and reading the answer's back. A refusal
// is a *wit.Refusal whose text opens with its token (not-granted:, over-limit:, bad-request:, failed:, or
// one of pull-artifact's for Pull). Built for another platform, both only return an error, so code using
// them builds and vets anywhere.
//
// An on-tool-call hook that asks the session's model about each call (a refusal or a failure denies):
//
//	package main
//
//	import (
//		"encoding/json"
//		"os"
//		"strings"
//
//		"github.com/murmur-run/murmur/member/artifact/wit"
//		"github.com/murmur-run/murmur/member/artifact/wit/guest"
//	)
//
//	func main() {
//		var ev struct{ Tool string; Input json.RawMessage }
//		json.NewDecoder(os.Stdin).Decode(&ev)
//		ans, err := guest.Infer(wit.InferenceRequest{MaxOutputTokens: 5, Messages: []wit.Message{{Role: wit.RoleUser,
//			Text: "Is this call of " + ev.Tool + " safe? Answer yes or no.\n" + string(ev.Input)}}})
//		decision, reason := "deny", "the model said "+ans.Text
//		if err != nil {
//			reason = err.Error()
//		} else if strings.HasPrefix(strings.ToLower(ans.Text), "yes") {
//			decision = "allow"
//		}
//		json.NewEncoder(os.Stdout).Encode(map[string]any{"status": "ok",
//			"data": map[string]string{"decision": decision, "reason": reason}})
//	}
//
// The package imports only the standard library and package wit, so a module stays small.
package guest

import (
	"encoding/json"
	"fmt"

	"github.com/murmur-run/murmur/member/artifact/wit"
)

// BufferSize is the buffer a call first offers for its answer; a longer answer is fetched whole with the
// host function answer, without calling the function again.
const BufferSize = 16 << 10

// host makes one call of the host module: fn's answer's bytes. A test replaces it.
var host = roundTrip

// Pull asks for an artifact as pull-artifact does ("scope/name", "scope/name@version", or a pattern
// ending in * for a listing) and returns pull-artifact's data. It is for a tool artifact whose capsule
// grants manage.pull, within the call the agent made of it.
func Pull(artifact string) (json.RawMessage, error) {
	req, err := json.Marshal(wit.PullRequest{Artifact: artifact})
	if err != nil {
		return nil, err
	}
	return ask(wit.FnManagePull, req)
}

// Infer makes one inference call on the session's current driver choice, without tools. It is for a hook
// artifact.
func Infer(req wit.InferenceRequest) (wit.InferenceAnswer, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return wit.InferenceAnswer{}, err
	}
	data, err := ask(wit.FnRunInference, b)
	if err != nil {
		return wit.InferenceAnswer{}, err
	}
	var ans wit.InferenceAnswer
	if err := json.Unmarshal(data, &ans); err != nil {
		return wit.InferenceAnswer{}, fmt.Errorf("%s.%s's answer is not {\"text\", \"usage\"}: %v", wit.Module, wit.FnRunInference, err)
	}
	return ans, nil
}

// ask calls fn with the request and reads its answer: a refusal is a *wit.Refusal.
func ask(fn string, req []byte) (json.RawMessage, error) {
	b, err := host(fn, req)
	if err != nil {
		return nil, err
	}
	return wit.Answer(b)
}
