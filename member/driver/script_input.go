package driver

import (
	"fmt"
	"text/template"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

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
