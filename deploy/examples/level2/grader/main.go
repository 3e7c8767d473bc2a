// Command grader is the level2 example's hook local/grader (WIT level 2, on-task-end): when the agent
// answers, it has the session's model grade the answer with run_inference (guest.Infer), and reopens the
// task when the model finds it weak. Each grading is an inference call of the task: it counts in
// session-status's turns.used against inference.max_turns.
//
//	GOOS=wasip1 GOARCH=wasm go build -o .murmur/store/local/grader/1.0.0/module.wasm ./grader
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
	var end struct {
		Status string `json:"status"`
		Answer string `json:"answer"`
	}
	// An end that cannot be read is not graded, as one that cannot be graded: the answer stays.
	err := json.NewDecoder(os.Stdin).Decode(&end)
	data := map[string]string{}
	if err == nil && end.Status == "completed" {
		ans, err := guest.Infer(wit.InferenceRequest{MaxOutputTokens: 50, Messages: []wit.Message{
			{Role: wit.RoleUser, Text: "Is this answer weak? Answer weak or good, then why.\nanswer: " + end.Answer},
		}})
		// A grading that could not be made leaves the answer as it is.
		if text := strings.TrimSpace(ans.Text); err == nil && strings.HasPrefix(strings.ToLower(text), "weak") {
			data["reopen"] = "A grader found your answer weak (" + text + "). Answer the task again, plainly."
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"status": "ok", "data": data}); err != nil {
		// No result reached the runtime: its failure shows this stderr.
		fmt.Fprintln(os.Stderr, "grader: writing the result:", err)
		os.Exit(1)
	}
}
