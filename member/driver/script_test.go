package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func loadScript(t *testing.T, path string) *Script {
	t.Helper()
	s, err := LoadScript(path)
	if err != nil {
		t.Fatalf("LoadScript: %v", err)
	}
	return s
}

func parseScript(t *testing.T, src string) *Script {
	t.Helper()
	s, err := ParseScript("/w/script.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

// call is the response of a turn that calls one tool.
func oneCall(id, name, input string) []ToolCall {
	return []ToolCall{{ID: id, Name: name, Input: json.RawMessage(input)}}
}

// jsonText compares RawMessages as text, so that a diff shows the JSON.
var jsonText = cmp.Transformer("jsonText", func(m json.RawMessage) string { return string(m) })

// TestScriptDriverRules plays the example of DESIGN §4.3: the first rule whose match matches the task
// plays the turn numbered by the assistant messages so far, its named groups in the template data.
func TestScriptDriverRules(t *testing.T) {
	d := NewScript("local", loadScript(t, "testdata/script/design.yaml"))
	if d.Name() != "local" {
		t.Errorf("Name() = %q, want local", d.Name())
	}
	user := func(text string) []ChatMessage { return []ChatMessage{{Role: RoleUser, Text: text}} }
	tests := []struct {
		name      string
		req       InferRequest
		wantText  string
		wantCalls []ToolCall
	}{
		{
			name:      "named groups fill a call-member input",
			req:       InferRequest{Task: "ask worker: what is 2+2", Messages: user("ask worker: what is 2+2"), Turn: 1},
			wantCalls: oneCall("call_1_1", "call-member", `{"member":"worker","task":"what is 2+2"}`),
		},
		{
			name: "the answers of the continuation",
			req: InferRequest{
				Task: "ask worker: what is 2+2",
				Messages: append(user("ask worker: what is 2+2"),
					ChatMessage{Role: RoleAssistant, Calls: oneCall("call_1_1", "call-member", `{}`)},
					ChatMessage{Role: RoleTool, Results: []ToolResult{{CallID: "call_1_1", Tool: "call-member", Status: "ok", Text: "started"}}},
					ChatMessage{Role: RoleUser, Text: "[call-member] call mcl_1 to worker ended completed: 4"}),
				Answers: []map[string]any{{"member": "worker", "call_id": "mcl_1", "status": "completed", "output": "4"}},
				Turn:    2,
			},
			wantText: "worker says: 4",
		},
		{
			name:      "a list input",
			req:       InferRequest{Task: "sum 2 3", Messages: user("sum 2 3"), Turn: 1},
			wantCalls: oneCall("call_1_1", "expr", `{"args":["2","+","3"]}`),
		},
		{
			name: "the tool call, then a say reading .results",
			req: InferRequest{
				Task: "sum 2 3",
				Messages: append(user("sum 2 3"),
					ChatMessage{Role: RoleAssistant, Calls: oneCall("call_1_1", "expr", `{"args":["2","+","3"]}`)},
					ChatMessage{Role: RoleTool, Results: []ToolResult{{CallID: "call_1_1", Tool: "expr", Status: "ok", Output: "5\n",
						Text: "<untrusted-content source=tool:expr>\n5\n</untrusted-content>"}}}),
				Turn: 2,
			},
			wantText: "5\n",
		},
		{
			name:     "the catch-all",
			req:      InferRequest{Task: "sum two and three", Messages: user("sum two and three"), Turn: 1},
			wantText: "echo: sum two and three",
		},
		{
			name:      "the first matching rule wins",
			req:       InferRequest{Task: "ask x: sum 1 2", Messages: user("ask x: sum 1 2"), Turn: 1},
			wantCalls: oneCall("call_1_1", "call-member", `{"member":"x","task":"sum 1 2"}`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Infer(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Infer: %v", err)
			}
			if got.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
			}
			if diff := cmp.Diff(tt.wantCalls, got.Calls, jsonText); diff != "" {
				t.Errorf("Calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScriptDriverTemplateData checks every key of the template data.
func TestScriptDriverTemplateData(t *testing.T) {
	s := parseScript(t, `rules:
  - match: '^go$'
    turns:
      - call: [{tool: probe, input: {n: 5, ok: true, none: null, f: 1.5, nested: {list: ['{{.task}}', 2, '{{.turn}}']}}}]
      - say: "turn={{.turn}} tools={{join .tools \",\"}} system={{.system}}\nmessage={{.message}}\nresults={{range .results}}{{.tool}}/{{.status}}/{{.output}}/{{.data.k}}/{{.text}};{{end}} answers={{len .answers}}\n---\n{{.transcript}}"
`)
	d := NewScript("local", s)
	req := InferRequest{
		System:   "be brief",
		Task:     "go",
		Tools:    []ToolSpec{{Name: "probe"}, {Name: "session-status"}},
		Messages: []ChatMessage{{Role: RoleUser, Text: "go"}},
		Turn:     1,
	}
	resp, err := d.Infer(context.Background(), req)
	if err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	want := oneCall("call_1_1", "probe", `{"f":1.5,"n":5,"nested":{"list":["go",2,"1"]},"none":null,"ok":true}`)
	if diff := cmp.Diff(want, resp.Calls, jsonText); diff != "" {
		t.Errorf("turn 1 calls (-want +got):\n%s", diff)
	}

	req.Messages = append(req.Messages,
		ChatMessage{Role: RoleAssistant, Text: "probing", Calls: resp.Calls},
		ChatMessage{Role: RoleTool, Results: []ToolResult{
			{CallID: "call_1_1", Tool: "probe", Status: "ok", Output: "fine", Data: map[string]any{"k": "v"}, Text: "T1"},
			{CallID: "call_1_2", Tool: "probe", Status: "error", Output: "bad", Data: map[string]any{"k": 1}, Text: "T2"},
		}})
	req.Turn = 2
	resp, err = d.Infer(context.Background(), req)
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	wantText := `turn=2 tools=probe,session-status system=be brief
message=T1

T2
results=probe/ok/fine/v/T1;probe/error/bad/1/T2; answers=0
---
user:
go

assistant:
probing
[call call_1_1] probe {"f":1.5,"n":5,"nested":{"list":["go",2,"1"]},"none":null,"ok":true}

tool:
T1

T2`
	if resp.Text != wantText {
		t.Errorf("turn 2 text:\n%s\nwant:\n%s", resp.Text, wantText)
	}
}

func TestScriptDriverOutOfTurns(t *testing.T) {
	s := parseScript(t, `rules:
  - match: '^say$'
    turns:
      - say: 'first {{.turn}}'
      - call: [{tool: x}]
  - match: '^call$'
    turns:
      - call: [{tool: x}]
`)
	d := NewScript("local", s)
	two := []ChatMessage{
		{Role: RoleUser, Text: "t"},
		{Role: RoleAssistant, Text: "first 1"},
		{Role: RoleUser, Text: "more"},
		{Role: RoleAssistant, Calls: oneCall("call_2_1", "x", `{}`)},
		{Role: RoleTool, Results: []ToolResult{{CallID: "call_2_1", Tool: "x", Status: "ok"}}},
	}
	resp, err := d.Infer(context.Background(), InferRequest{Task: "say", Messages: two, Turn: 3})
	if err != nil {
		t.Fatalf("a rule with a say: %v", err)
	}
	if resp.Text != "first 3" || resp.Calls != nil {
		t.Errorf("a rule out of turns answered %q with calls %v; want its last say, rendered: %q", resp.Text, resp.Calls, "first 3")
	}

	_, err = d.Infer(context.Background(), InferRequest{Task: "call", Messages: two[:2], Turn: 2})
	want := "script: rule at /w/script.yaml:6 ran out of turns with nothing to say"
	if err == nil || err.Error() != want {
		t.Errorf("a rule with no say, out of turns: error %v, want %q", err, want)
	}
}

func TestScriptDriverNoMatch(t *testing.T) {
	d := NewScript("local", parseScript(t, "rules:\n  - match: '^only this$'\n    turns: [{say: ok}]\n"))
	_, err := d.Infer(context.Background(), InferRequest{Task: "something else"})
	want := "script: no rule in /w/script.yaml matches the task; add a catch-all rule with match: '' at the end of rules"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestScriptDriverTemplateRunError checks that a template failing at run time names the rule's line: a
// key no result has, which only the data of that call can show.
func TestScriptDriverTemplateRunError(t *testing.T) {
	d := NewScript("local", parseScript(t, `rules:
  - match: ''
    turns:
      - say: '{{(index .answers 0).outptu}}'
`))
	_, err := d.Infer(context.Background(), InferRequest{Task: "x", Answers: []map[string]any{{"output": "4"}}})
	want := `script: rule at /w/script.yaml:2, turn 1 (line 4): at <0>: map has no entry for key "outptu"`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant  %q", err, want)
	}
}

func TestScriptDriverCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewScript("d", DefaultScript()).Infer(ctx, InferRequest{Task: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Infer on a canceled context: %v, want context.Canceled", err)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "a quote left open from the first line is named there, not past the file's end",
			yaml: "rules: \"oops\n  - match: x\n",
			want: []string{
				`/w/script.yaml:1: not valid YAML: found unexpected end of stream; fix the syntax there: indent with spaces only, and quote text that holds ": " or starts with one of {[*&!|>%@'"`,
			},
		},
		{
			name: "unknown key in rule",
			yaml: `rules:
  - match: ''
    turn:
      - say: hi
`,
			want: []string{
				"/w/script.yaml:3: unknown key \"turn\" in rules[0]; known keys: match, turns; did you mean \"turns\"?",
			},
		},
		{
			name: "template does not compile",
			yaml: `rules:
  - match: ''
    turns:
      - say: 'hello {{.task'
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].say is not a valid template: unclosed action; fix the template; actions are written {{.task}}, {{.member}} or {{(index .results 0).output}}",
			},
		},
		{
			name: "template reads unknown field",
			yaml: `rules:
  - match: '^ask (?P<member>[a-z]+)$'
    turns:
      - say: 'hello {{.membr}}'
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].say reads .membr, which the template data does not hold; the template data holds .task, .results, .answers, .message, .transcript, .system, .tools, .turn, .member; did you mean \".member\"?",
			},
		},
		{
			name: "input template reads unknown field",
			yaml: `rules:
  - match: ''
    turns:
      - call: [{tool: expr, input: {args: ['{{$.tsk}}']}}]
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].call[0].input.args[0] reads .tsk, which the template data does not hold; the template data holds .task, .results, .answers, .message, .transcript, .system, .tools, .turn; did you mean \".task\"?",
			},
		},
		{
			name: "bad regexp",
			yaml: `rules:
  - match: '(unclosed'
    turns:
      - say: hi
`,
			want: []string{
				"/w/script.yaml:2: rules[0].match is not an RE2 expression: missing closing ): `(unclosed`; fix the expression; write it in single quotes so that YAML leaves its backslashes alone",
			},
		},
		{
			name: "group shadows data key",
			yaml: `rules:
  - match: '(?P<task>.*)'
    turns:
      - say: hi
`,
			want: []string{
				"/w/script.yaml:2: rules[0].match names a group \"task\", which is a key the template data already has; rename the group; these names are taken: task, results, answers, message, transcript, system, tools, turn",
			},
		},
		{
			name: "no match key",
			yaml: `rules:
  - turns:
      - say: hi
`,
			want: []string{
				"/w/script.yaml:2: rules[0] has no match; write match: with an RE2 expression the task text must match, or match: '' to match every task",
			},
		},
		{
			name: "say and call",
			yaml: `rules:
  - match: ''
    turns:
      - say: hi
        call: [{tool: x}]
`,
			want: []string{
				"/w/script.yaml:5: rules[0].turns[0] both says and calls; split it into two turns: the calls first, then the say",
			},
		},
		{
			name: "ask and data",
			yaml: `rules:
  - match: ''
    turns:
      - ask: which?
        data: {a: 1}
      - data: [1, 2]
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0] has ask and data: a turn does one of them; split it into one turn each, such as the calls first, then the say",
				"/w/script.yaml:6: rules[0].turns[1].data must be a mapping of keys, not a list; write its keys indented under data:, or as data: {key: value}",
			},
		},
		{
			name: "neither",
			yaml: `rules:
  - match: ''
    turns:
      - {}
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0] neither says, calls, asks nor answers data; write say: TEXT, call: [{tool: NAME, input: {...}}], ask: QUESTION or data: {...}",
			},
		},
		{
			name: "call without tool",
			yaml: `rules:
  - match: ''
    turns:
      - call: [{input: {a: 1}}]
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].call[0] names no tool; write tool: NAME, such as tool: call-member",
			},
		},
		{
			name: "input not a mapping",
			yaml: `rules:
  - match: ''
    turns:
      - call: [{tool: x, input: [1]}]
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].call[0].input must be a mapping of keys, not a list; write its keys indented under input:, or as input: {key: value}",
			},
		},
		{
			name: "empty turns",
			yaml: `rules:
  - match: ''
    turns: []
`,
			want: []string{
				"/w/script.yaml:3: rules[0].turns is empty; write at least one turn, such as turns: [{say: 'done'}]",
			},
		},
		{
			name: "no rules",
			yaml: `rule: []
`,
			want: []string{
				"/w/script.yaml:1: unknown key \"rule\" at the top level; known keys: rules; did you mean \"rules\"?",
			},
		},
		{
			name: "range body not checked",
			yaml: `rules:
  - match: ''
    turns:
      - say: '{{range .results}}{{.output}}{{end}}{{with .tools}}{{join . ","}}{{else}}{{.nope}}{{end}}'
`,
			want: []string{
				"/w/script.yaml:4: rules[0].turns[0].say reads .nope, which the template data does not hold; the template data holds .task, .results, .answers, .message, .transcript, .system, .tools, .turn",
			},
		},
		{
			name: "empty file",
			yaml: "",
			want: []string{
				"/w/script.yaml:1: the file is empty; write rules: [{match: '', turns: [{say: 'echo: {{.task}}'}]}]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseScript("/w/script.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParseScript succeeded with %+v; want errors", s)
			}
			var got []string
			for _, e := range unjoin(err) {
				var se *ScriptError
				if !errors.As(e, &se) || se.Line < 1 || se.Fix == "" {
					t.Errorf("error %q is not a *ScriptError with a line and a fix", e)
				}
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadScriptMissing(t *testing.T) {
	_, err := LoadScript("testdata/script/nope.yaml")
	var se *ScriptError
	if !errors.As(err, &se) {
		t.Fatalf("LoadScript of a missing file: %v, want a *ScriptError", err)
	}
}

func TestDefaultScript(t *testing.T) {
	s := DefaultScript()
	if len(s.Rules) != 1 || s.Rules[0].Match != "" || len(s.Rules[0].Turns) != 1 || s.Rules[0].Turns[0].Say != "echo: {{.task}}" {
		t.Fatalf("DefaultScript() = %+v; want one rule match: '' saying 'echo: {{.task}}'", s.Rules)
	}
	d := NewScript("local", s)
	for _, task := range []string{"hello", "", "multi\nline {{.task}}"} {
		resp, err := d.Infer(context.Background(), InferRequest{Task: task, Messages: []ChatMessage{{Role: RoleUser, Text: task}}, Turn: 1})
		if err != nil {
			t.Fatalf("Infer(%q): %v", task, err)
		}
		if want := "echo: " + task; resp.Text != want || resp.Calls != nil {
			t.Errorf("Infer(%q) = %q, %v; want %q and no call", task, resp.Text, resp.Calls, want)
		}
	}
}

// TestScriptDriverUsage checks the deterministic estimate: a quarter of the characters, rounded up, of
// what is sent (system prompt, every message as the model sees it, the tool array) and what comes back.
func TestScriptDriverUsage(t *testing.T) {
	d := NewScript("local", loadScript(t, "testdata/script/design.yaml"))
	req := InferRequest{
		System:   "abcd",                                                                             // 4
		Messages: []ChatMessage{{Role: RoleUser, Text: "hello"}},                                     // 5
		Tools:    []ToolSpec{{Name: "ls", Description: "lists", InputSchema: json.RawMessage(`{}`)}}, // 2+5+2
		Task:     "hello",
		Turn:     1,
	}
	want := Usage{Input: 5, Output: 3, Reported: true} // ceil(18/4), ceil(len("echo: hello")/4)
	for i := range 3 {
		resp, err := d.Infer(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, resp.Usage); diff != "" {
			t.Errorf("call %d: usage (-want +got):\n%s", i, diff)
		}
	}
	// A call turn's output is the tool name and its input.
	req.Task = "sum 2 3"
	resp, err := d.Infer(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if out := int64((len("expr") + len(`{"args":["2","+","3"]}`) + 3) / 4); resp.Usage.Output != out {
		t.Errorf("call turn output tokens = %d, want %d", resp.Usage.Output, out)
	}
	if EstimateTokens("") != 0 || EstimateTokens("abcde") != 2 || EstimateTokens("ééé") != 1 {
		t.Errorf("EstimateTokens does not count a quarter of the characters, rounded up")
	}
}

// TestScriptDriverConcurrent runs many tasks through one driver at once; with -race it checks that the
// driver keeps no state between calls.
func TestScriptDriverConcurrent(t *testing.T) {
	d := NewScript("local", loadScript(t, "testdata/script/design.yaml"))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			task := fmt.Sprintf("sum %d %d", i, i+1)
			resp, err := d.Infer(context.Background(), InferRequest{Task: task, Messages: []ChatMessage{{Role: RoleUser, Text: task}}, Turn: 1})
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf(`{"args":["%d","+","%d"]}`, i, i+1); string(resp.Calls[0].Input) != want {
				errs <- fmt.Errorf("task %q: input %s, want %s", task, resp.Calls[0].Input, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestModelView(t *testing.T) {
	tests := []struct {
		msg  ChatMessage
		want string
	}{
		{ChatMessage{Role: RoleUser, Text: "hi"}, "hi"},
		{ChatMessage{Role: RoleAssistant, Text: "done"}, "done"},
		{ChatMessage{Role: RoleAssistant, Calls: oneCall("c1", "ls", `{"args":[]}`)}, `[call c1] ls {"args":[]}`},
		{ChatMessage{Role: RoleTool, Results: []ToolResult{{Text: "a"}, {Text: "b"}}}, "a\n\nb"},
		{ChatMessage{Role: RoleTool}, ""},
	}
	for _, tt := range tests {
		if got := tt.msg.ModelView(); got != tt.want {
			t.Errorf("%+v.ModelView() = %q, want %q", tt.msg, got, tt.want)
		}
	}
	if !strings.Contains(ChatMessage{Role: RoleAssistant, Text: "x", Calls: oneCall("c", "n", "{}")}.ModelView(), "x\n[call c] n {}") {
		t.Errorf("an assistant message with text and calls shows the text, then the calls")
	}
}

// unjoin returns the errors joined in err (err itself when it joins none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestScriptDriverAskAndData: an ask: turn answers with a question for the sender, a data: turn with a JSON
// value (its text the same JSON), string leaves rendered.
func TestScriptDriverAskAndData(t *testing.T) {
	s, err := ParseScript("/w/script.yaml", []byte("rules:\n  - match: '^convert (?P<amount>.+)$'\n    turns:\n      - ask: 'Into which currency, {{.amount}}?'\n      - data: {amount: '{{.amount}}', currency: '{{.message}}', rate: 1.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := NewScript("local", s)
	resp, err := d.Infer(context.Background(), InferRequest{Task: "convert 12 USD", Turn: 1, Messages: []ChatMessage{{Role: RoleUser, Text: "convert 12 USD"}}})
	if err != nil || resp.Ask != "Into which currency, 12 USD?" || resp.Text != "" || resp.Calls != nil {
		t.Fatalf("ask turn: %+v %v", resp, err)
	}
	resp, err = d.Infer(context.Background(), InferRequest{Task: "convert 12 USD", Turn: 2, Messages: []ChatMessage{{Role: RoleUser, Text: "convert 12 USD"},
		{Role: RoleAssistant, Text: resp.Ask}, {Role: RoleUser, Text: "EUR"}}})
	if want := `{"amount":"12 USD","currency":"EUR","rate":1.5}`; err != nil || string(resp.Data) != want || resp.Text != want {
		t.Fatalf("data turn: %+v %v, want %s", resp, err, want)
	}
}
