package roster

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

const (
	capsuleFile      = "murmur.yaml"
	firstDefaultPort = 7101
	defaultHost      = "127.0.0.1"
)

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	yamlLine    = regexp.MustCompile(`^line (\d+): (.*)$`)

	topKeys    = []string{"formation", "entry", "members", "reach", "store"}
	memberKeys = []string{"name", "capsule", "listen", "url", "store", "store_password", "replicas"}
	ruleKeys   = []string{"from", "to"}
)

const exampleRoster = "formation: NAME, then members: with one entry per member (- name: NAME with capsule: DIR under it)"

// Parse validates data as the roster.yaml at path and returns the roster with its defaults filled in.
// path names the file in error messages as given; relative capsule directories are resolved against
// its directory. Every problem found is reported: see Error.
func Parse(path string, data []byte) (*Roster, error) {
	if path == "" {
		path = "roster.yaml"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	p := &parser{file: path, dir: filepath.Dir(abs)}
	r := &Roster{Path: abs, Dir: p.dir}
	if root := p.root(data); root != nil {
		p.roster(root, r)
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// parser collects the problems of one file.
type parser struct {
	file string
	dir  string
	errs []*Error
}

func (p *parser) add(line int, msg, fix string) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: msg, Fix: fix})
}

// root decodes data and returns its top-level mapping, or nil after recording why there is none.
func (p *parser) root(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "the file is empty", "write "+exampleRoster)
		} else {
			p.syntax(data, err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.add(next.Line, "a second YAML document starts here", "keep one roster per file: remove this --- and what follows it")
	case !errors.Is(err, io.EOF):
		p.syntax(data, err)
		return nil
	}
	if len(doc.Content) == 0 || yamldoc.IsNull(yamldoc.Deref(doc.Content[0])) {
		p.add(0, "the file is empty", "write "+exampleRoster)
		return nil
	}
	n := yamldoc.Deref(doc.Content[0])
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, "the file must be a mapping of keys, not "+yamldoc.Describe(n), "write "+exampleRoster)
		return nil
	}
	return n
}

// syntax records a YAML syntax error of data at the line where it is.
func (p *parser) syntax(data []byte, err error) {
	line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		line = yamldoc.ProblemLine(data, line)
	}
	p.add(line, "not valid YAML: "+msg,
		`fix the syntax there: indent with spaces, not tabs, and quote text that holds ": " or starts with * & ! | > % @ (write "*" as to: ["*"])`)
}

// field is one key of a mapping with its value.
type field struct{ key, val *yaml.Node }

// fields returns the known keys of the mapping n, reporting unknown and repeated keys. where says which
// mapping it is, for messages ("at the top level", "in member lead").
func (p *parser) fields(n *yaml.Node, where string, known []string) map[string]field {
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamldoc.Deref(n.Content[i]), yamldoc.Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, fmt.Sprintf("a key %s is %s", where, yamldoc.Describe(k)), "write plain names as keys; known keys: "+strings.Join(known, ", "))
			continue
		}
		if !slices.Contains(known, k.Value) {
			fix := "known keys: " + strings.Join(known, ", ")
			if s, ok := closest(k.Value, known); ok {
				fix = fmt.Sprintf("did you mean %q? %s", s, fix)
			}
			p.add(k.Line, fmt.Sprintf("unknown key %q %s", k.Value, where), fix)
			continue
		}
		if first, dup := out[k.Value]; dup {
			p.add(k.Line, fmt.Sprintf("key %q appears twice %s (first at line %d)", k.Value, where, first.key.Line), "keep one of them")
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out
}

// text reads f's value as one scalar. what names it in messages ("capsule of member lead"); example is
// a line that would be right ("capsule: ./lead"); optional keys are told they may be removed.
func (p *parser) text(f field, what, example string, optional bool) (string, bool) {
	fix := "write " + example
	if optional {
		fix += ", or remove the key"
	}
	switch {
	case yamldoc.IsNull(f.val):
		p.add(f.key.Line, what+" has no value", fix)
		return "", false
	case f.val.Kind != yaml.ScalarNode:
		p.add(f.key.Line, fmt.Sprintf("%s must be a single value, not %s", what, yamldoc.Describe(f.val)), fix)
		return "", false
	case f.val.Value == "":
		p.add(f.key.Line, what+" is empty", fix)
		return "", false
	}
	return f.val.Value, true
}

func (p *parser) roster(root *yaml.Node, r *Roster) {
	top := p.fields(root, "at the top level", topKeys)

	if f, ok := top["formation"]; ok {
		r.Formation, _ = p.text(f, "formation", "the formation's name, such as formation: hello", false)
	} else {
		p.add(root.Line, "formation is missing", "add the formation's name at the top level, such as formation: hello")
	}

	ms := &members{line: map[string]int{}}
	if f, ok := top["members"]; ok {
		r.Members = p.members(f, ms)
	} else {
		p.add(root.Line, "members is missing", "add members: with one entry per member, such as members: [{name: lead, capsule: ./lead}]")
	}

	if f, ok := top["entry"]; ok {
		if name, ok := p.text(f, "entry", "the name of the member the operator talks to, such as entry: lead", true); ok {
			if !ms.has(name) {
				p.add(f.key.Line, fmt.Sprintf("entry %q is no member", name), ms.unknown(name))
			}
			r.Entry = name
		}
	}

	if f, ok := top["reach"]; ok {
		r.Reach = p.reach(f, ms)
	}

	if f, ok := top["store"]; ok {
		r.Store = p.store(f)
	}
}

// closest returns the option nearest to got within edit distance 2, if one is.
func closest(got string, options []string) (string, bool) {
	best := yamldoc.Closest(got, options)
	return best, best != ""
}
