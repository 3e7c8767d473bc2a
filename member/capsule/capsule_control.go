package capsule

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/yamldoc"
)

// control reads the control: block: the control surface's tokens and the settings the agent may change.
func (p *capsuleParser) control(v *yaml.Node) {
	p.d.Fields(v, "control", []yamldoc.Field{
		{Name: "tokens", Fn: func(_, v *yaml.Node) { p.controlTokens(v) }},
		{Name: "agent_settings", Fn: func(_, v *yaml.Node) { p.agentSettings(v) }},
	})
}

// agentSettings reads control.agent_settings, each entry a setting the agent may change.
func (p *capsuleParser) agentSettings(v *yaml.Node) {
	d := p.d
	list, ok := d.Texts(v, "control.agent_settings")
	if !ok {
		return
	}
	p.c.Control.AgentSettings = list
	for i, s := range list {
		if s != string(ids.SettingInferenceDriver) {
			d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("control.agent_settings entry %q is not a setting the agent may change", s),
				"the settings are: "+string(ids.SettingInferenceDriver)+yamldoc.DidYouMean(s, []string{string(ids.SettingInferenceDriver)}))
		}
	}
}

// checkAgentSettings refuses inference.driver among control.agent_settings of a capsule without an
// inference: block (infKey nil).
func (p *capsuleParser) checkAgentSettings(infKey *yaml.Node) {
	c := p.c
	if !c.IsAgent() && infKey == nil && slices.Contains(c.Control.AgentSettings, string(ids.SettingInferenceDriver)) {
		p.d.Add(p.d.Lines["control.agent_settings"], "control.agent_settings lists inference.driver, but a script capsule has no inference: block",
			"remove inference.driver from control.agent_settings, or make this an agent capsule")
	}
}
