package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The export formats are built as yaml.v3 node trees rather than structs, so that key order, quoting
// and flow style are chosen here and the output is byte-for-byte stable.

// ynode turns a value of the export's trees into a node: a *yaml.Node as it is, a string, an int, a
// bool, or a []string (a block sequence).
func ynode(v any) *yaml.Node {
	switch v := v.(type) {
	case *yaml.Node:
		return v
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case []string:
		items := make([]any, len(v))
		for i, s := range v {
			items[i] = s
		}
		return yseq(items...)
	}
	panic(fmt.Sprintf("ynode: unsupported %T", v))
}

// ymap returns a mapping of key, value pairs in the order given; a nil value drops its key.
func ymap(pairs ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == nil {
			continue
		}
		if v, ok := pairs[i+1].(*yaml.Node); ok && v == nil {
			continue
		}
		n.Content = append(n.Content, ynode(pairs[i].(string)), ynode(pairs[i+1]))
	}
	return n
}

// yseq returns a block sequence.
func yseq(items ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, it := range items {
		n.Content = append(n.Content, ynode(it))
	}
	return n
}

// yflow returns a flow sequence: [a, b, c].
func yflow(items ...any) *yaml.Node {
	n := yseq(items...)
	n.Style = yaml.FlowStyle
	return n
}

// yquoted returns a double-quoted string, for values a YAML 1.1 reader could take for something else
// (port mappings, "true").
func yquoted(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

// yliteral returns a string as a literal block (|) when it spans lines, for file contents.
func yliteral(s string) *yaml.Node {
	n := ynode(s)
	if strings.Contains(s, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}

// encodeYAML writes header (comment lines, each prefixed with "# ") and then every document, separated
// by ---.
func encodeYAML(header []string, docs ...*yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range header {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
