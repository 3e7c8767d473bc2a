package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"

	"github.com/murmur-run/murmur/internal/yamldoc/yamldoctest"
)

// FuzzParseScript parses arbitrary bytes as a script.yaml and plays the script against a fuzzed task.
// A parse either fails with *ScriptErrors at lines of the file, or gives rules that each have a
// compiled match and turns that each say or call; then every turn of the matching rule (and one past
// the last) either answers, with text or with calls whose inputs are JSON objects, or fails naming the
// script, and the same request always gets the same answer.
func FuzzParseScript(f *testing.F) {
	const path = "/w/script.yaml"
	design, err := os.ReadFile("testdata/script/design.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(design, "ask worker: what is 2+2")
	f.Add(design, "sum 2 3")
	f.Add(defaultScriptYAML, "hello")
	f.Add([]byte("rules:\n  - match: '^(?P<x>a+)$'\n    turns:\n      - call: [{tool: t, input: {n: 1, l: ['{{.x}}', true, null], m: {k: '{{json .tools}}'}}}]\n      - say: '{{trim .x}} {{.turn}}'\n"), "aaa")
	f.Add([]byte("rules:\n  - match: '('\n    turns: []\n"), "x")
	f.Add([]byte("rules:\n  - match: ''\n    turns:\n      - say: '{{.nope}}'\n"), "")

	f.Fuzz(func(t *testing.T, data []byte, task string) {
		s, err := ParseScript(path, data)
		if err != nil {
			yamldoctest.CheckErrors(t, path, data, err, func(e *ScriptError) yamldoctest.Fields {
				return yamldoctest.Fields{File: e.File, Line: e.Line, Msg: e.Msg, Fix: e.Fix}
			})
			return
		}
		if len(s.Rules) == 0 {
			t.Fatalf("a script without rules parsed:\n%s", data)
		}
		maxTurns := 0
		for _, r := range s.Rules {
			if r.re == nil || len(r.Turns) == 0 {
				t.Fatalf("rule at line %d has no compiled match or no turns:\n%s", r.Line, data)
			}
			for _, turn := range r.Turns {
				if (turn.say != nil) == (len(turn.Calls) > 0) {
					t.Fatalf("turn at line %d must either say or call:\n%s", turn.Line, data)
				}
			}
			maxTurns = max(maxTurns, len(r.Turns))
		}
		if !boundedScript(s) {
			return
		}
		d := NewScript("local", s)
		for turn := 1; turn <= maxTurns+1; turn++ {
			req := InferRequest{Task: task, Messages: []ChatMessage{{Role: RoleUser, Text: task}}, Turn: turn,
				Tools: []ToolSpec{{Name: "call-member"}}, System: "you are fuzzed"}
			resp, err := d.Infer(context.Background(), req)
			again, err2 := d.Infer(context.Background(), req)
			if fmt.Sprint(err) != fmt.Sprint(err2) || !reflect.DeepEqual(resp, again) {
				t.Fatalf("the same request answered twice differently: %+v, %v; then %+v, %v", resp, err, again, err2)
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "script: ") || !strings.Contains(err.Error(), path) {
					t.Fatalf("turn %d failed with an error that does not name the script: %v", turn, err)
				}
				continue
			}
			if resp.Usage.Input < 0 || resp.Usage.Output < 0 || !resp.Usage.Reported || resp.Usage.Estimated {
				t.Fatalf("usage %+v, want the script driver's own count, reported, of 0 or more", resp.Usage)
			}
			for i, c := range resp.Calls {
				var in map[string]any
				if err := json.Unmarshal(c.Input, &in); err != nil {
					t.Fatalf("call %d's input %s is not a JSON object: %v", i, c.Input, err)
				}
				if c.Name == "" || c.ID != fmt.Sprintf("call_%d_%d", turn, i+1) {
					t.Fatalf("call %d is %q with id %q", i, c.Name, c.ID)
				}
			}
			if len(resp.Calls) > 0 && resp.Text != "" {
				t.Fatalf("turn %d both says and calls: %+v", turn, resp)
			}
		}
	})
}

// boundedScript reports whether every template of s runs in time and memory bounded by its data. A
// script is its operator's program: {{range 1000000000}} or {{printf "%999999999d" 1}} take what they
// ask for, by design, so the fuzzer plays only the scripts that cannot ask for that.
func boundedScript(s *Script) bool {
	var templates []*template.Template
	var walk func(n inputNode)
	walk = func(n inputNode) {
		switch n := n.(type) {
		case inputMap:
			for _, v := range n.vals {
				walk(v)
			}
		case inputList:
			for _, v := range n {
				walk(v)
			}
		case inputTemplate:
			templates = append(templates, n.t)
		}
	}
	for _, r := range s.Rules {
		for _, turn := range r.Turns {
			if turn.say != nil {
				templates = append(templates, turn.say)
			}
			for _, c := range turn.Calls {
				walk(c.input)
			}
		}
	}
	for _, tmpl := range templates {
		for _, tt := range tmpl.Templates() {
			if tt.Tree == nil || len(tt.Tree.Root.String()) > 200 || !boundedNode(tt.Tree.Root) {
				return false
			}
		}
	}
	return true
}

func boundedNode(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.RangeNode, *parse.TemplateNode:
		return false
	case *parse.IdentifierNode:
		return !slices.Contains([]string{"printf", "print", "println"}, n.Ident)
	case *parse.ListNode:
		if n == nil {
			return true
		}
		for _, c := range n.Nodes {
			if !boundedNode(c) {
				return false
			}
		}
	case *parse.ActionNode:
		return boundedNode(n.Pipe)
	case *parse.IfNode:
		return boundedNode(n.Pipe) && boundedNode(n.List) && boundedNode(n.ElseList)
	case *parse.WithNode:
		return boundedNode(n.Pipe) && boundedNode(n.List) && boundedNode(n.ElseList)
	case *parse.PipeNode:
		if n == nil {
			return true
		}
		for _, c := range n.Cmds {
			if !boundedNode(c) {
				return false
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if !boundedNode(a) {
				return false
			}
		}
	case *parse.ChainNode:
		return boundedNode(n.Node)
	}
	return true
}
