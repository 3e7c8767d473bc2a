package roster

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// members is what the parser knows of the members while it checks the rest of the file.
type members struct {
	names []string       // every name given, valid or not, in roster order
	line  map[string]int // the line of each name's first use
}

func (ms *members) has(name string) bool { _, ok := ms.line[name]; return ok }

// unknown returns the fix for a name that is no member: the closest member's name, or the list of them.
func (ms *members) unknown(name string) string {
	if s, ok := closest(name, ms.names); ok {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if len(ms.names) == 0 {
		return "name a member listed under members:"
	}
	return "the members are " + strings.Join(ms.names, ", ")
}

// members checks the members: list entry by entry, then the doors across members: no two may share an
// address, a member without listen: gets the next free default port, and one without url: the URL of
// its listen address.
func (p *parser) members(f field, ms *members) []Member {
	if yamldoc.IsNull(f.val) || f.val.Kind == yaml.SequenceNode && len(f.val.Content) == 0 {
		p.add(f.key.Line, "members lists no member", "add at least one, such as members: [{name: lead, capsule: ./lead}]")
		return nil
	}
	if f.val.Kind != yaml.SequenceNode {
		p.add(f.key.Line, "members must be a list, not "+yamldoc.Describe(f.val),
			`write one entry per member under members:, each "- name: NAME" with "capsule: DIR" indented under it`)
		return nil
	}
	var out []Member
	var slots []slot
	var listenLines, urlLines []int
	for i, item := range f.val.Content {
		if item.Kind == yaml.AliasNode {
			p.add(item.Line, fmt.Sprintf("member %d is the alias *%s of another entry", i+1, item.Value),
				"write each member out in full: every member needs a name and a door of its own")
			continue
		}
		item = yamldoc.Deref(item)
		if item.Kind != yaml.MappingNode {
			p.add(item.Line, fmt.Sprintf("member %d must be a mapping with name: and capsule:, not %s", i+1, yamldoc.Describe(item)),
				`write "- name: NAME" with "capsule: DIR" indented under it, or - {name: NAME, capsule: DIR}`)
			continue
		}
		m, s, lines := p.member(item, ms)
		out = append(out, m)
		slots = append(slots, s)
		listenLines = append(listenLines, lines[0])
		urlLines = append(urlLines, lines[1])
	}
	p.checkListenClashes(out, slots, listenLines)
	assignDefaultPorts(out, slots)
	p.deriveURLs(out, slots, urlLines)
	return out
}

// label names a member in messages.
func label(name string) string {
	if name == "" || !namePattern.MatchString(name) {
		return "this member"
	}
	return "member " + name
}

// peekName returns the member entry's name, if it has a plain one, so that messages about its other keys
// can name it.
func peekName(item *yaml.Node) string { return peekScalar(item, "name") }

func peekScalar(item *yaml.Node, key string) string {
	for i := 0; i+1 < len(item.Content); i += 2 {
		if k, v := yamldoc.Deref(item.Content[i]), yamldoc.Deref(item.Content[i+1]); k.Value == key && v.Kind == yaml.ScalarNode && !yamldoc.IsNull(v) {
			return v.Value
		}
	}
	return ""
}
