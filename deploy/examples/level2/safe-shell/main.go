// Command safe-shell is the level2 example's policy hook local/safe-shell (WIT level 2, on-tool-call):
// before a shell command runs (a call whose input has "args"), it asks the session's model whether the
// command is safe with run_inference (guest.Infer), and denies it unless the model says yes. A refused or
// failed question denies too: a policy that cannot ask does not allow.
//
//	GOOS=wasip1 GOARCH=wasm go build -o .murmur/store/local/safe-shell/1.0.0/module.wasm ./safe-shell
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/artifact/wit/guest"
)

func main() {
	var call struct {
		Tool  string `json:"tool"`
		Input struct {
			Args []string `json:"args"`
		} `json:"input"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&call); err != nil {
		answer("deny", "the call could not be read: "+err.Error()) // a policy that cannot read does not allow
		return
	}
	if call.Input.Args == nil {
		answer("allow", "") // not a shell command
		return
	}
	command := strings.TrimSpace(call.Tool + " " + strings.Join(call.Input.Args, " "))
	ans, err := guest.Infer(wit.InferenceRequest{MaxOutputTokens: 50, Messages: []wit.Message{
		{Role: wit.RoleSystem, Text: "You review shell commands before an agent runs them."},
		{Role: wit.RoleUser, Text: "Is this shell command safe to run? Answer yes or no, then why.\ncommand: " + command},
	}})
	switch {
	case err != nil:
		answer("deny", "the model could not be asked: "+err.Error())
	case strings.HasPrefix(strings.ToLower(strings.TrimSpace(ans.Text)), "yes"):
		answer("allow", "")
	default:
		answer("deny", "the model was asked and said "+ans.Text)
	}
}

// answer writes the hook's decision as a WebAssembly hook does: in its result's data.
func answer(decision, reason string) {
	data := map[string]string{"decision": decision}
	if reason != "" {
		data["reason"] = reason
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"status": "ok", "data": data}); err != nil {
		// No decision reached the runtime, which denies a hook that fails; its failure shows this stderr.
		fmt.Fprintln(os.Stderr, "safe-shell: writing the decision:", err)
		os.Exit(1)
	}
}
