// Command loud is the level2 example's tool local/loud (WIT level 2): it needs its companion tool
// local/shout, so it pulls it into the session with manage.pull (guest.Pull, the same pull as
// pull-artifact's) and tells the model to call shout from its next turn.
//
//	GOOS=wasip1 GOARCH=wasm go build -o .murmur/store/local/loud/1.0.0/module.wasm ./loud
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/murmur-run/murmur/member/artifact/wit/guest"
)

func main() {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		write("error", `loud takes {"text": "…"}: `+err.Error(), nil)
		return
	}
	data, err := guest.Pull("local/shout")
	if err != nil {
		// A refusal: its text opens with a token (not-granted:, not-found:, …) and says why.
		write("error", "loud needs its companion tool local/shout, and the pull was refused: "+err.Error(), nil)
		return
	}
	write("ok", "shout is in your tool list from your next turn: call shout with {\"text\": \""+in.Text+"\"} to make the text loud", data)
}

func write(status, output string, data json.RawMessage) {
	if err := json.NewEncoder(os.Stdout).Encode(struct {
		Status string          `json:"status"`
		Output string          `json:"output"`
		Data   json.RawMessage `json:"data,omitempty"`
	}{status, output, data}); err != nil {
		// No result reached the runtime: its failure shows this stderr.
		fmt.Fprintln(os.Stderr, "loud: writing the result:", err)
		os.Exit(1)
	}
}
