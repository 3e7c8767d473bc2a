package driver_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/murmur-run/murmur/member/driver"
)

// A tiny script.yaml (docs/script-driver.md): greet, hand a sum to a calculator tool and report its
// result, or echo anything else.
const script = `rules:
  - match: '(?i)^\s*(hi|hello)\b'
    turns:
      - say: 'Hello! You said: {{.task}}'
  - match: '^add (?P<a>\d+) and (?P<b>\d+)$'
    turns:
      - call: [{tool: calculator, input: {expression: '{{.a}}+{{.b}}'}}]
      - say: 'the sum is {{(index .results 0).output}}'
  - match: ''
    turns:
      - say: 'heard: {{.task}}'
`

// The script driver plays the first rule whose match matches the task, one turn per inference call.
func ExampleScriptDriver_Infer() {
	s, err := driver.ParseScript("script.yaml", []byte(script))
	if err != nil {
		fmt.Println(err)
		return
	}
	model := driver.NewScript("local", s)
	ctx := context.Background()

	task := "hello there"
	resp, err := model.Infer(ctx, driver.InferRequest{
		Task:     task,
		Turn:     1,
		Messages: []driver.ChatMessage{{Role: driver.RoleUser, Text: task}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	// The script driver reports its own token counts: a quarter of the characters, rounded up.
	fmt.Println("tokens in/out:", resp.Usage.Input, resp.Usage.Output)
	// Output:
	// Hello! You said: hello there
	// tokens in/out: 3 7
}

// A rule of several turns: the first call asks for a tool, the second sees the tool's result, as a
// model would in the conversation the agent loop sends back.
func ExampleScriptDriver_Infer_toolCall() {
	s, err := driver.ParseScript("script.yaml", []byte(script))
	if err != nil {
		fmt.Println(err)
		return
	}
	model := driver.NewScript("local", s)
	ctx := context.Background()

	task := "add 2 and 3"
	conversation := []driver.ChatMessage{{Role: driver.RoleUser, Text: task}}
	first, err := model.Infer(ctx, driver.InferRequest{Task: task, Turn: 1, Messages: conversation})
	if err != nil {
		fmt.Println(err)
		return
	}
	call := first.Calls[0]
	fmt.Println("turn 1 calls", call.Name, string(call.Input), "as", call.ID)

	// The agent loop runs the tool and sends its result in the next call.
	conversation = append(conversation,
		driver.ChatMessage{Role: driver.RoleAssistant, Calls: first.Calls},
		driver.ChatMessage{Role: driver.RoleTool, Results: []driver.ToolResult{
			{CallID: call.ID, Tool: call.Name, Status: "ok", Output: "5", Text: "5"},
		}})
	second, err := model.Infer(ctx, driver.InferRequest{Task: task, Turn: 2, Messages: conversation})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("turn 2 says:", second.Text)
	// Output:
	// turn 1 calls calculator {"expression":"2+3"} as call_1_1
	// turn 2 says: the sum is 5
}

// A choice without script: plays the embedded default, which echoes the task.
func ExampleDefaultScript() {
	model := driver.NewScript("local", driver.DefaultScript())
	resp, err := model.Infer(context.Background(), driver.InferRequest{Task: "ping", Turn: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	// Output:
	// echo: ping
}

// A script is read strictly: every mistake is reported with its file and line and what to write
// instead, each a *driver.ScriptError.
func ExampleParseScript_errors() {
	const broken = `rules:
  - match: '(unclosed'
    turns:
      - say: 'hi'
  - match: ''
    turns:
      - sya: 'hello'
`
	_, err := driver.ParseScript("script.yaml", []byte(broken))
	fmt.Println(err)

	var first *driver.ScriptError
	if errors.As(err, &first) {
		fmt.Println("first problem on line", first.Line)
	}
	// Output:
	// script.yaml:2: rules[0].match is not an RE2 expression: missing closing ): `(unclosed`; fix the expression; write it in single quotes so that YAML leaves its backslashes alone
	// script.yaml:7: unknown key "sya" in rules[1].turns[0]; known keys: ask, data, say, call; did you mean "say"?
	// script.yaml:7: rules[1].turns[0] neither says, calls, asks nor answers data; write say: TEXT, call: [{tool: NAME, input: {...}}], ask: QUESTION or data: {...}
	// first problem on line 2
}

// What the model is sent of a tool's output: fenced as data it must not take for instructions, with
// the runtime's note after the fence.
func ExampleFence() {
	fmt.Println(driver.Fence("tool:shell", "total 0", "[shell] exit status 0"))
	// Output:
	// <untrusted-content source=tool:shell>
	// total 0
	// </untrusted-content>
	// [shell] exit status 0
}
