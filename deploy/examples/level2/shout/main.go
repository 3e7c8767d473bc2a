// Command shout is the level2 example's companion tool local/shout (WIT level 1): local/loud pulls it
// into the session when it needs it.
//
//	GOOS=wasip1 GOARCH=wasm go build -o .murmur/store/local/shout/1.0.0/module.wasm ./shout
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	var in struct {
		Text string `json:"text"`
	}
	res := map[string]string{"status": "ok"}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil || in.Text == "" {
		res = map[string]string{"status": "error", "output": `shout takes {"text": "…"}`}
	} else {
		res["output"] = strings.ToUpper(strings.TrimRight(in.Text, ".!")) + "!"
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		// No result reached the runtime: its failure shows this stderr.
		fmt.Fprintln(os.Stderr, "shout: writing the result:", err)
		os.Exit(1)
	}
}
