package driver

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"

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

// LoadScript reads and compiles the script.yaml at path. A text this process has compiled before is not
// compiled again: the Script shares its rules (see scriptMemo).
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ScriptError{File: path, Msg: "the script file does not exist",
			Fix: "create it, or remove the choice's script: to use the embedded default"}
	}
	if err != nil {
		return nil, &ScriptError{File: path, Msg: "cannot be read: " + err.Error(), Fix: "make the file readable"}
	}
	return scriptRules.parse(path, data)
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

// DefaultScript returns the embedded default script: one catch-all rule that answers 'echo: ' and the
// task text. Each call parses it anew, so the caller may change what it gets.
func DefaultScript() *Script {
	s, err := ParseScript(defaultScriptName, defaultScriptYAML)
	if err != nil {
		panic("member: the embedded default script does not parse: " + err.Error())
	}
	return s
}

// sharedDefaultScript is the default script parsed once a process, for the drivers Build makes: a
// Script is immutable, and a driver only reads it, so every member of a formation plays the same one.
var sharedDefaultScript = sync.OnceValue(DefaultScript)
