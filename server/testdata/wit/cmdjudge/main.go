// Command cmdjudge is a WIT level 2 command hook for the tests (on-tool-call): it asks the session's model
// whether a shell command is safe through the run_inference endpoint its run is given (MUR_HOST_SOCKET,
// MUR_HOST_KEY), and denies unless the model says yes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
)

func main() {
	var call struct {
		Tool  string `json:"tool"`
		Input struct {
			Args []string `json:"args"`
		} `json:"input"`
	}
	json.NewDecoder(os.Stdin).Decode(&call)
	if call.Input.Args == nil {
		decide("allow", "")
		return
	}
	socket, token := os.Getenv("MUR_HOST_SOCKET"), os.Getenv("MUR_HOST_KEY")
	if socket == "" || token == "" {
		decide("deny", "this run was given no run_inference endpoint")
		return
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user",
		"text": "Is this shell command safe to run? Answer yes or no, then why.\ncommand: " + call.Tool + " " + strings.Join(call.Input.Args, " ")}}})
	req, _ := http.NewRequest("POST", "http://murmur/run_inference", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		decide("deny", "the endpoint could not be reached: "+err.Error())
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ans struct {
		Text  string  `json:"text"`
		Error *string `json:"error"`
	}
	json.Unmarshal(b, &ans)
	switch {
	case ans.Error != nil:
		decide("deny", "the model could not be asked: "+*ans.Error)
	case strings.HasPrefix(strings.ToLower(ans.Text), "yes"):
		decide("allow", "")
	default:
		decide("deny", "the model was asked and said "+ans.Text)
	}
}

func decide(decision, reason string) {
	json.NewEncoder(os.Stdout).Encode(map[string]string{"decision": decision, "reason": reason})
}
