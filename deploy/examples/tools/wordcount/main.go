// Command wordcount is the example tool artifact local/wordcount: a WebAssembly (WASI preview 1) module
// that counts the words and lines of a text, given inline or as a file in the session's workdir.
//
// Build it into the example's project store (docs/artifacts.md):
//
//	GOOS=wasip1 GOARCH=wasm go build -o .murmur/store/local/wordcount/1.0.0/tool.wasm ./wordcount
//
// The contract is every tool artifact's: the call's input JSON on stdin, one result object on stdout,
// {"status": "ok" | "error", "output": "…", "data": …}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type input struct {
	Text string `json:"text"`
	Path string `json:"path"`
}

type result struct {
	Status string         `json:"status"`
	Output string         `json:"output"`
	Data   map[string]int `json:"data,omitempty"`
}

func main() {
	var in input
	res := result{Status: "error"}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		res.Output = "wordcount takes {\"text\": \"…\"} or {\"path\": \"a file in the workdir\"}: " + err.Error()
	} else {
		text := in.Text
		if in.Path != "" {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				res.Output = err.Error()
				write(res)
				return
			}
			text = string(b)
		}
		words, lines := len(strings.Fields(text)), strings.Count(text, "\n")
		if text != "" && !strings.HasSuffix(text, "\n") {
			lines++
		}
		res = result{Status: "ok", Output: fmt.Sprintf("%d words, %d lines", words, lines), Data: map[string]int{"words": words, "lines": lines}}
	}
	write(res)
}

func write(r result) {
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		// No result reached the runtime: its failure shows this stderr.
		fmt.Fprintln(os.Stderr, "wordcount: writing the result:", err)
		os.Exit(1)
	}
}
