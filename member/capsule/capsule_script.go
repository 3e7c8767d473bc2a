package capsule

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

func (p *capsuleParser) script(k, v *yaml.Node) *ScriptSpec {
	d := p.d
	s := &ScriptSpec{}
	var cmdVal *yaml.Node
	ok := d.Fields(v, "script", []yamldoc.Field{
		{Name: "command", Fn: func(_, v *yaml.Node) {
			cmdVal = v
			s.Command, _ = d.Texts(v, "script.command")
		}},
		{Name: "timeout_secs", Fn: func(_, v *yaml.Node) { s.TimeoutSecs = (d.CountOr0(v, "script.timeout_secs")) }},
	})
	if !ok {
		return s
	}
	p.command(k, cmdVal, s.Command, "script.command", "command: [./answer.sh]")
	return s
}

// command checks a program-and-arguments list; key is the block that holds it, val its value (nil when
// the key is absent).
func (p *capsuleParser) command(k, val *yaml.Node, cmd []string, path, example string) {
	d := p.d
	switch {
	case val == nil:
		d.Missing(k.Line, path, path+" is missing", "name the program and its arguments, such as "+example)
	case yamldoc.IsSeq(val) && len(cmd) == 0:
		d.Add(val.Line, path+" is empty", "name the program and its arguments, such as "+example)
	default:
		for i, s := range cmd {
			if strings.TrimSpace(s) == "" {
				d.Add(yamldoc.ItemLine(val, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
			}
		}
	}
}
