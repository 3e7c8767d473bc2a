package driver

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

//go:embed default_script.yaml
var defaultScriptYAML []byte

// defaultScriptName is how errors name the embedded default script.
const defaultScriptName = "embedded:default_script.yaml"

// Script is a parsed script.yaml (DESIGN §4.3): rules tried in order against the task text, each playing
// its turns one per inference call. Every match and template is compiled at load. A Script is immutable
// and safe for concurrent use.
type Script struct {
	Path  string // the file it was read from, as errors name it
	Rules []ScriptRule
}

// ScriptRule is one rule: the RE2 expression the task text must match and the turns it plays.
type ScriptRule struct {
	Line  int // line of the rule in Path
	Match string
	Turns []ScriptTurn

	re *regexp.Regexp
}

// ScriptTurn is one turn: it says Say, makes Calls, asks the task's sender Ask (DESIGN §15: the task
// waits in TASK_STATE_INPUT_REQUIRED and the answer comes back as a user message), or answers with Data
// (a data part). Exactly one is set; a turn without Calls ends the task or asks.
type ScriptTurn struct {
	Line  int
	Say   string
	Calls []ScriptCall
	Ask   string
	Data  any // the data as written; its string leaves are templates

	say  *template.Template
	ask  *template.Template
	data inputNode
}

// ScriptCall is one tool call of a turn. Input's string leaves are templates.
type ScriptCall struct {
	Line  int
	Tool  string
	Input any // the input as written: map[string]any, []any and scalars

	input inputNode
}

// ScriptError is one thing wrong in a script.yaml, with the line to change and what to write instead.
type ScriptError struct {
	File string
	Line int // 0 when the error concerns the whole file
	Msg  string
	Fix  string
}

func (e *ScriptError) Error() string { return yamldoc.Format(e.File, e.Line, e.Msg, e.Fix) }

// The keys every template's data holds, besides the matching rule's named groups.
var scriptDataKeys = []string{"task", "results", "answers", "message", "transcript", "system", "tools", "turn"}

// scriptFuncs are the functions a script template may call beyond text/template's own.
var scriptFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := scriptJSON(v)
		return string(b), err
	},
	"join": strings.Join,
	"trim": strings.TrimSpace,
}

// LoadScript reads and compiles the script.yaml at path.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ScriptError{File: path, Msg: "the script file does not exist",
			Fix: "create it, or remove the choice's script: to use the embedded default"}
	}
	if err != nil {
		return nil, &ScriptError{File: path, Msg: "cannot be read: " + err.Error(), Fix: "make the file readable"}
	}
	return ParseScript(path, data)
}

// ParseScript parses data as the script.yaml at path, strictly: unknown keys, wrong types, expressions
// that are not RE2 and templates that do not compile are errors, every one reported (joined with
// errors.Join, each a *ScriptError) with its line.
func ParseScript(path string, data []byte) (*Script, error) {
	d := &yamldoc.Doc{
		Lines: map[string]int{},
		Mk: func(line int, msg, fix string) error {
			return &ScriptError{File: path, Line: line, Msg: msg, Fix: fix}
		},
	}
	root := d.Root(data, "rules: [{match: '', turns: [{say: 'echo: {{.task}}'}]}]")
	if root == nil {
		return nil, d.Err()
	}
	s := &Script{Path: path}
	var rulesKey *yaml.Node
	d.Fields(root, "", []yamldoc.Field{{Name: "rules", Fn: func(k, v *yaml.Node) {
		rulesKey = k
		if !d.IsKind(v, yaml.SequenceNode, "rules") {
			return
		}
		if len(v.Content) == 0 {
			d.Add(v.Line, "rules is empty", "write at least one rule, such as rules: [{match: '', turns: [{say: 'echo: {{.task}}'}]}]")
		}
		for i, rn := range v.Content {
			if r, ok := parseRule(d, yamldoc.Deref(rn), fmt.Sprintf("rules[%d]", i)); ok {
				s.Rules = append(s.Rules, r)
			}
		}
	}}})
	if rulesKey == nil {
		d.Missing(root.Line, "rules", "rules is missing", "write rules: followed by a list of rules, the last one match: '' as a catch-all")
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func parseRule(d *yamldoc.Doc, n *yaml.Node, path string) (ScriptRule, bool) {
	r := ScriptRule{Line: n.Line}
	var matchVal, turnsKey *yaml.Node
	var turnNodes []*yaml.Node
	if !d.Fields(n, path, []yamldoc.Field{
		{Name: "match", Fn: func(_, v *yaml.Node) {
			if s, ok := d.Text(v, path+".match"); ok {
				r.Match, matchVal = s, v
			}
		}},
		{Name: "turns", Fn: func(k, v *yaml.Node) {
			turnsKey = k
			if d.IsKind(v, yaml.SequenceNode, path+".turns") {
				turnNodes = v.Content
				if len(turnNodes) == 0 {
					d.Add(v.Line, path+".turns is empty", "write at least one turn, such as turns: [{say: 'done'}]")
				}
			}
		}},
	}) {
		return r, false
	}
	ok := true
	groups := []string{}
	if matchVal == nil && d.Lines[path+".match"] == 0 {
		d.Missing(n.Line, path+".match", path+" has no match", "write match: with an RE2 expression the task text must match, or match: '' to match every task")
		ok = false
	} else if matchVal != nil {
		re, err := regexp.Compile(r.Match)
		if err != nil {
			d.Add(matchVal.Line, fmt.Sprintf("%s.match is not an RE2 expression: %s", path, strings.TrimPrefix(err.Error(), "error parsing regexp: ")),
				"fix the expression; write it in single quotes so that YAML leaves its backslashes alone")
			ok = false
		} else {
			r.re = re
			for _, g := range re.SubexpNames() {
				if g == "" {
					continue
				}
				if slices.Contains(scriptDataKeys, g) {
					d.Add(matchVal.Line, fmt.Sprintf("%s.match names a group %q, which is a key the template data already has", path, g),
						"rename the group; these names are taken: "+strings.Join(scriptDataKeys, ", "))
					ok = false
				}
				groups = append(groups, g)
			}
		}
	} else {
		ok = false
	}
	if turnsKey == nil {
		d.Missing(n.Line, path+".turns", path+" has no turns", "write turns: with at least one turn, such as turns: [{say: 'done'}]")
		ok = false
	}
	known := append(slices.Clone(scriptDataKeys), groups...)
	for i, tn := range turnNodes {
		t, tok := parseTurn(d, yamldoc.Deref(tn), fmt.Sprintf("%s.turns[%d]", path, i), known)
		ok = ok && tok
		r.Turns = append(r.Turns, t)
	}
	return r, ok
}

func parseTurn(d *yamldoc.Doc, n *yaml.Node, path string, known []string) (ScriptTurn, bool) {
	t := ScriptTurn{Line: n.Line}
	var sayKey, callKey, askKey, dataKey *yaml.Node
	// say: and ask: are one template each.
	text := func(name string, key **yaml.Node, src *string, tpl **template.Template) yamldoc.Field {
		return yamldoc.Field{Name: name, Fn: func(k, v *yaml.Node) {
			*key = k
			if s, good := d.Text(v, path+"."+name); good {
				*src, *tpl = s, compileTemplate(d, v, path+"."+name, s, known)
			}
		}}
	}
	ok := d.Fields(n, path, []yamldoc.Field{
		text("ask", &askKey, &t.Ask, &t.ask),
		{Name: "data", Fn: func(k, v *yaml.Node) {
			dataKey = k
			if !d.IsKind(v, yaml.MappingNode, path+".data") {
				return
			}
			raw, in, good := compileInput(d, v, path+".data", known)
			if good {
				t.Data, t.data = raw, in
			}
		}},
		text("say", &sayKey, &t.Say, &t.say),
		{Name: "call", Fn: func(k, v *yaml.Node) {
			callKey = k
			if !d.IsKind(v, yaml.SequenceNode, path+".call") {
				return
			}
			if len(v.Content) == 0 {
				d.Add(v.Line, path+".call is empty", "list at least one call, such as call: [{tool: expr, input: {args: ['1', '+', '2']}}]")
			}
			for i, cn := range v.Content {
				if c, good := parseCall(d, yamldoc.Deref(cn), fmt.Sprintf("%s.call[%d]", path, i), known); good {
					t.Calls = append(t.Calls, c)
				}
			}
		}},
	})
	if !ok {
		return t, false
	}
	var set []string
	for _, k := range []*yaml.Node{sayKey, callKey, askKey, dataKey} {
		if k != nil {
			set = append(set, k.Value)
		}
	}
	switch {
	case len(set) == 2 && sayKey != nil && callKey != nil:
		d.Add(callKey.Line, path+" both says and calls", "split it into two turns: the calls first, then the say")
		return t, false
	case len(set) > 1:
		d.Add(n.Line, fmt.Sprintf("%s has %s: a turn does one of them", path, strings.Join(set, " and ")),
			"split it into one turn each, such as the calls first, then the say")
		return t, false
	case len(set) == 0:
		d.Add(n.Line, path+" neither says, calls, asks nor answers data", "write say: TEXT, call: [{tool: NAME, input: {...}}], ask: QUESTION or data: {...}")
		return t, false
	}
	return t, (sayKey != nil && t.say != nil) || (callKey != nil && len(t.Calls) > 0) || (askKey != nil && t.ask != nil) || (dataKey != nil && t.data != nil)
}

func parseCall(d *yamldoc.Doc, n *yaml.Node, path string, known []string) (ScriptCall, bool) {
	c := ScriptCall{Line: n.Line, Input: map[string]any{}}
	c.input = inputMap{}
	var toolKey *yaml.Node
	good := true
	if !d.Fields(n, path, []yamldoc.Field{
		{Name: "tool", Fn: func(k, v *yaml.Node) {
			toolKey = k
			if s, ok := d.Text(v, path+".tool"); ok {
				c.Tool = s
				if strings.TrimSpace(s) == "" {
					d.Add(v.Line, path+".tool is empty", "name the tool to call, such as tool: call-member")
					good = false
				}
			} else {
				good = false
			}
		}},
		{Name: "input", Fn: func(_, v *yaml.Node) {
			if !d.IsKind(v, yaml.MappingNode, path+".input") {
				good = false
				return
			}
			raw, in, ok := compileInput(d, v, path+".input", known)
			c.Input, c.input, good = raw, in, good && ok
		}},
	}) {
		return c, false
	}
	if toolKey == nil {
		d.Missing(n.Line, path+".tool", path+" names no tool", "write tool: NAME, such as tool: call-member")
		return c, false
	}
	return c, good
}

// inputNode is a compiled tool input: rendering it executes its templates.
type inputNode interface {
	render(data map[string]any) (any, error)
}

type inputMap struct {
	keys []string
	vals []inputNode
}

type inputList []inputNode

type inputTemplate struct{ t *template.Template }

type inputLiteral struct{ v any }

func (m inputMap) render(data map[string]any) (any, error) {
	out := make(map[string]any, len(m.keys))
	for i, k := range m.keys {
		v, err := m.vals[i].render(data)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (l inputList) render(data map[string]any) (any, error) {
	out := make([]any, len(l))
	for i, n := range l {
		v, err := n.render(data)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (t inputTemplate) render(data map[string]any) (any, error) { return execTemplate(t.t, data) }

func (l inputLiteral) render(map[string]any) (any, error) { return l.v, nil }

// compileInput compiles the input value v: its string leaves become templates, other scalars pass
// through as YAML reads them. It returns the value as written, too.
func compileInput(d *yamldoc.Doc, v *yaml.Node, path string, known []string) (any, inputNode, bool) {
	v = yamldoc.Deref(v)
	switch v.Kind {
	case yaml.MappingNode:
		raw := map[string]any{}
		m := inputMap{}
		ok := true
		d.Walk(v, path, func(k, val *yaml.Node) {
			r, n, good := compileInput(d, val, path+"."+k.Value, known)
			ok = ok && good
			raw[k.Value] = r
			m.keys = append(m.keys, k.Value)
			m.vals = append(m.vals, n)
		})
		return raw, m, ok
	case yaml.SequenceNode:
		raw := make([]any, len(v.Content))
		l := make(inputList, len(v.Content))
		ok := true
		for i, item := range v.Content {
			r, n, good := compileInput(d, item, fmt.Sprintf("%s[%d]", path, i), known)
			ok = ok && good
			raw[i], l[i] = r, n
		}
		return raw, l, ok
	case yaml.ScalarNode:
		if v.ShortTag() == "!!str" {
			t := compileTemplate(d, v, path, v.Value, known)
			return v.Value, inputTemplate{t}, t != nil
		}
		var lit any
		if err := v.Decode(&lit); err != nil {
			d.Add(v.Line, fmt.Sprintf("%s cannot be read: %v", path, err), "quote it to pass it as text")
			return nil, inputLiteral{}, false
		}
		return lit, inputLiteral{lit}, true
	}
	d.Add(v.Line, fmt.Sprintf("%s is %s", path, yamldoc.Describe(v)), "write text, a number, true, false, a list or a mapping")
	return nil, inputLiteral{}, false
}

var templatePrefixRE = regexp.MustCompile(`^template: [^:]*:\d+(:\d+)?: `)

// compileTemplate compiles src, the value at v, and checks that every field it reads from the template
// data's top level is one the data will hold; it reports problems at v's line and returns nil then.
func compileTemplate(d *yamldoc.Doc, v *yaml.Node, path, src string, known []string) *template.Template {
	t, err := template.New("t").Option("missingkey=error").Funcs(scriptFuncs).Parse(src)
	if err != nil {
		d.Add(v.Line, fmt.Sprintf("%s is not a valid template: %s", path, templatePrefixRE.ReplaceAllString(err.Error(), "")),
			"fix the template; actions are written {{.task}}, {{.member}} or {{(index .results 0).output}}")
		return nil
	}
	bad := ""
	rootFields(t.Tree.Root, true, func(name string) {
		if bad == "" && !slices.Contains(known, name) {
			bad = name
		}
	})
	if bad != "" {
		dotted := make([]string, len(known))
		for i, k := range known {
			dotted[i] = "." + k
		}
		fix := "the template data holds " + strings.Join(dotted, ", ")
		if near := yamldoc.Closest(bad, known); near != "" {
			fix += fmt.Sprintf("; did you mean \".%s\"?", near)
		}
		d.Add(v.Line, fmt.Sprintf("%s reads .%s, which the template data does not hold", path, bad), fix)
		return nil
	}
	return t
}

// rootFields calls fn with the first name of every field the template reads from its top-level data:
// .name where dot is the data itself, and $.name anywhere.
func rootFields(n parse.Node, dotIsRoot bool, fn func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			rootFields(c, dotIsRoot, fn)
		}
	case *parse.ActionNode:
		rootFields(n.Pipe, dotIsRoot, fn)
	case *parse.IfNode:
		rootFields(n.Pipe, dotIsRoot, fn)
		rootFields(n.List, dotIsRoot, fn)
		rootFields(n.ElseList, dotIsRoot, fn)
	case *parse.RangeNode:
		rootFields(n.Pipe, dotIsRoot, fn)
		rootFields(n.List, false, fn)
		rootFields(n.ElseList, dotIsRoot, fn)
	case *parse.WithNode:
		rootFields(n.Pipe, dotIsRoot, fn)
		rootFields(n.List, false, fn)
		rootFields(n.ElseList, dotIsRoot, fn)
	case *parse.TemplateNode:
		rootFields(n.Pipe, dotIsRoot, fn)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			rootFields(c, dotIsRoot, fn)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			rootFields(a, dotIsRoot, fn)
		}
	case *parse.ChainNode:
		rootFields(n.Node, dotIsRoot, fn)
	case *parse.FieldNode:
		if dotIsRoot && len(n.Ident) > 0 {
			fn(n.Ident[0])
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			fn(n.Ident[1])
		}
	}
}

var execPrefixRE = regexp.MustCompile(`^template: [^:]*:\d+(:\d+)?: executing "[^"]*" `)

func execTemplate(t *template.Template, data map[string]any) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", errors.New(execPrefixRE.ReplaceAllString(err.Error(), ""))
	}
	return b.String(), nil
}

// DefaultScript returns the embedded default script: one catch-all rule that answers 'echo: ' and the
// task text.
func DefaultScript() *Script {
	s, err := ParseScript(defaultScriptName, defaultScriptYAML)
	if err != nil {
		panic("member: the embedded default script does not parse: " + err.Error())
	}
	return s
}

// ScriptDriver is the script driver: a deterministic model playing a Script. It keeps no state between
// calls: the rule is chosen from the task text and the turn from the number of assistant messages, so
// one driver serves any number of tasks at once.
type ScriptDriver struct {
	name   string
	script *Script
}

var _ Driver = (*ScriptDriver)(nil)

// NewScript returns a driver named name (the driver choice it serves) that plays s.
func NewScript(name string, s *Script) *ScriptDriver {
	return &ScriptDriver{name: name, script: s}
}

// Name returns the driver choice's name.
func (d *ScriptDriver) Name() string { return d.name }

// Infer plays the next turn of the first rule whose match matches req.Task.
func (d *ScriptDriver) Infer(ctx context.Context, req InferRequest) (InferResponse, error) {
	if err := ctx.Err(); err != nil {
		return InferResponse{}, err
	}
	s := d.script
	var rule *ScriptRule
	var groups []string
	for i := range s.Rules {
		if m := s.Rules[i].re.FindStringSubmatch(req.Task); m != nil {
			rule, groups = &s.Rules[i], m
			break
		}
	}
	if rule == nil {
		return InferResponse{}, fmt.Errorf("script: no rule in %s matches the task; add a catch-all rule with match: '' at the end of rules", s.Path)
	}
	// The turn played is the task's inference call count (req.Turn), so a conversation that was
	// compacted does not replay its turns; without it, the assistant messages so far are counted.
	played := req.Turn - 1
	if req.Turn <= 0 {
		played = 0
		for _, m := range req.Messages {
			if m.Role == RoleAssistant {
				played++
			}
		}
	}
	turnNo := played + 1
	data := scriptData(req, rule, groups, turnNo)

	var turn *ScriptTurn
	if played < len(rule.Turns) {
		turn = &rule.Turns[played]
	} else {
		for i := len(rule.Turns) - 1; i >= 0; i-- {
			if rule.Turns[i].Calls == nil && rule.Turns[i].ask == nil {
				turn = &rule.Turns[i]
				break
			}
		}
		if turn == nil {
			return InferResponse{}, fmt.Errorf("script: rule at %s:%d ran out of turns with nothing to say", s.Path, rule.Line)
		}
	}
	fail := func(line int, err error) error {
		return fmt.Errorf("script: rule at %s:%d, turn %d (line %d): %w", s.Path, rule.Line, played+1, line, err)
	}

	var resp InferResponse
	outChars := 0
	switch {
	case turn.ask != nil:
		text, err := execTemplate(turn.ask, data)
		if err != nil {
			return InferResponse{}, fail(turn.Line, err)
		}
		resp.Ask = text
		outChars = utf8.RuneCountInString(text)
	case turn.data != nil:
		v, err := turn.data.render(data)
		if err != nil {
			return InferResponse{}, fail(turn.Line, err)
		}
		if resp.Data, err = scriptJSON(v); err != nil {
			return InferResponse{}, fail(turn.Line, fmt.Errorf("data does not encode as JSON: %v", err))
		}
		resp.Text = string(resp.Data)
		outChars = utf8.RuneCount(resp.Data)
	case turn.Calls == nil:
		text, err := execTemplate(turn.say, data)
		if err != nil {
			return InferResponse{}, fail(turn.Line, err)
		}
		resp.Text = text
		outChars = utf8.RuneCountInString(text)
	default:
		for i, c := range turn.Calls {
			v, err := c.input.render(data)
			if err != nil {
				return InferResponse{}, fail(c.Line, err)
			}
			in, err := scriptJSON(v)
			if err != nil {
				return InferResponse{}, fail(c.Line, fmt.Errorf("input does not encode as JSON: %v", err))
			}
			resp.Calls = append(resp.Calls, ToolCall{ID: fmt.Sprintf("call_%d_%d", turnNo, i+1), Name: c.Tool, Input: in})
			outChars += utf8.RuneCountInString(c.Tool) + utf8.RuneCount(in)
		}
	}
	// The script driver is its own provider: its deterministic count is what it reports.
	resp.Usage = Usage{Input: EstimateInput(req), Output: int64((outChars + 3) / 4), Reported: true}
	return resp, nil
}

// scriptData is what a template sees (DESIGN §4.3).
func scriptData(req InferRequest, rule *ScriptRule, groups []string, turn int) map[string]any {
	data := map[string]any{}
	for i, name := range rule.re.SubexpNames() {
		if name != "" && i < len(groups) {
			data[name] = groups[i]
		}
	}
	results := []map[string]any{}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == RoleTool {
			for _, r := range m.Results {
				results = append(results, map[string]any{
					"call_id": r.CallID, "tool": r.Tool, "status": r.Status,
					"output": r.Output, "data": r.Data, "text": r.Text,
				})
			}
			break
		}
	}
	answers := req.Answers
	if answers == nil {
		answers = []map[string]any{}
	}
	message := ""
	views := make([]string, len(req.Messages))
	for i, m := range req.Messages {
		view := m.ModelView()
		views[i] = string(m.Role) + ":\n" + view
		message = view
	}
	tools := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = t.Name
	}
	data["task"] = req.Task
	data["results"] = results
	data["answers"] = answers
	data["message"] = message
	data["transcript"] = strings.Join(views, "\n\n")
	data["system"] = req.System
	data["tools"] = tools
	data["turn"] = turn
	return data
}

// scriptJSON encodes v without escaping <, > and &, which tool inputs carry as written.
func scriptJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
