package roster

import (
	"cmp"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// reach checks the reach: list, one rule per calling member.
func (p *parser) reach(f field, ms *members) []Rule {
	if yamldoc.IsNull(f.val) {
		return nil // every rule commented out: nobody calls anybody
	}
	if f.val.Kind != yaml.SequenceNode {
		p.add(f.key.Line, "reach must be a list of rules, not "+yamldoc.Describe(f.val),
			`write one rule per caller under reach:, each "- from: MEMBER" with "to: [MEMBER, ...]" under it`)
		return nil
	}
	var out []Rule
	for i, item := range f.val.Content {
		item = yamldoc.Deref(item)
		if item.Kind != yaml.MappingNode {
			p.add(item.Line, fmt.Sprintf("reach rule %d must be a mapping with from: and to:, not %s", i+1, yamldoc.Describe(item)),
				"write - {from: MEMBER, to: [MEMBER, ...]}")
			continue
		}
		out = append(out, p.rule(item, ms))
	}
	return out
}

// rule checks one reach rule: from: names a member, to: the members it may call or "*".
func (p *parser) rule(item *yaml.Node, ms *members) Rule {
	rule := Rule{Line: item.Line}
	where := "in this reach rule"
	if name := peekScalar(item, "from"); name != "" {
		where = "in the reach rule from " + name
	}
	f := p.fields(item, where, ruleKeys)

	fromOK := false
	if ff, ok := f["from"]; !ok {
		p.add(item.Line, "this reach rule has no from", "add the calling member, such as from: "+cmp.Or(first(ms.names), "lead"))
	} else if name, ok := p.text(ff, "from of this reach rule", "the calling member, such as from: "+cmp.Or(first(ms.names), "lead"), false); ok {
		rule.From = name
		switch {
		case name == "*":
			p.add(ff.key.Line, `from: "*" is not a member`, "write one rule per calling member, such as from: "+cmp.Or(first(ms.names), "lead"))
		case !ms.has(name):
			p.add(ff.key.Line, fmt.Sprintf("from %q of this reach rule is no member", name), ms.unknown(name))
		default:
			fromOK = true
		}
	}
	caller := cmp.Or(rule.From, "this member")
	ruleName := "this reach rule"
	if rule.From != "" {
		ruleName = "the reach rule from " + rule.From
	}
	example := fmt.Sprintf("name the members %s may call, such as to: [%s], or to: [\"*\"] for every other member", caller, exampleCallee(ms.names, rule.From))

	tf, ok := f["to"]
	switch {
	case !ok:
		p.add(item.Line, ruleName+" has no to", example)
		return rule
	case yamldoc.IsNull(tf.val) || tf.val.Kind == yaml.SequenceNode && len(tf.val.Content) == 0:
		p.add(tf.key.Line, "to of "+ruleName+" is empty",
			fmt.Sprintf("name the members %s may call, such as to: [%s], or remove the rule", caller, exampleCallee(ms.names, rule.From)))
		return rule
	case tf.val.Kind != yaml.SequenceNode:
		fix := example
		if tf.val.Kind == yaml.ScalarNode {
			fix = fmt.Sprintf("write to: [%s]", tf.val.Value)
			if tf.val.Value == "*" {
				fix = `write to: ["*"]`
			}
		}
		p.add(tf.key.Line, fmt.Sprintf("to of %s must be a list, not %s", ruleName, yamldoc.Describe(tf.val)), fix)
		return rule
	}
	for _, n := range tf.val.Content {
		n = yamldoc.Deref(n)
		if n.Kind != yaml.ScalarNode || yamldoc.IsNull(n) || n.Value == "" {
			p.add(n.Line, fmt.Sprintf("an entry of to in %s is %s, not a member name", ruleName, yamldoc.Describe(n)), example)
			continue
		}
		name := n.Value
		rule.To = append(rule.To, name)
		switch {
		case name == "*":
		case fromOK && name == rule.From:
			p.add(n.Line, fmt.Sprintf("member %s reaches itself", name),
				fmt.Sprintf("remove %s from this to: list (a member never calls itself)", name))
		case !ms.has(name):
			p.add(n.Line, fmt.Sprintf("to %q of %s is no member", name, ruleName), ms.unknown(name))
		}
	}
	return rule
}

func exampleCallee(names []string, from string) string {
	for _, n := range names {
		if n != from {
			return n
		}
	}
	return "worker"
}

func first(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
