// Command puller is a WIT level 2 test tool: it pulls the artifact its input names with manage.pull and
// answers pull-artifact's data, or the refusal's text as an error.
package main

import (
	"encoding/json"
	"os"

	"github.com/murmur-run/murmur/member/artifact/wit/guest"
)

func main() {
	var in struct {
		Artifact string `json:"artifact"`
	}
	json.NewDecoder(os.Stdin).Decode(&in)
	res := map[string]string{"status": "ok"}
	if data, err := guest.Pull(in.Artifact); err != nil {
		res["status"], res["output"] = "error", err.Error()
	} else {
		res["output"] = string(data)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}
