package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

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
