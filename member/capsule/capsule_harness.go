package capsule

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// HarnessDialects are the values of harness.dialect (DESIGN §13; member/harness reads them).
var HarnessDialects = []string{"claude-stream-json", "murmur-jsonl"}

// declaresProcess reports whether the top-level mapping n says transport: process.
func declaresProcess(n *yaml.Node) bool {
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "transport" && n.Content[i+1].Value == TransportProcess {
			return true
		}
	}
	return false
}

// harness parses the harness: block (DESIGN §13).
func (p *capsuleParser) harness(v *yaml.Node) *Harness {
	d := p.d
	h := &Harness{Network: true}
	var commandSet, dialectSet bool
	ok := d.Fields(v, "harness", []yamldoc.Field{
		{Name: "command", Fn: func(_, v *yaml.Node) {
			list, ok := d.Texts(v, "harness.command")
			if !ok {
				return
			}
			commandSet = true
			if len(list) == 0 || strings.TrimSpace(list[0]) == "" {
				d.Add(v.Line, "harness.command is empty",
					"write the harness and its arguments, such as command: [claude, -p, --output-format, stream-json, --verbose, --mcp-config, \"{mcp_config}\"]")
				return
			}
			h.Command = list
		}},
		{Name: "resume", Fn: func(_, v *yaml.Node) { h.Resume, _ = d.Texts(v, "harness.resume") }},
		{Name: "dialect", Fn: func(_, v *yaml.Node) {
			dialectSet = true
			h.Dialect, _ = d.Enum(v, "harness.dialect", HarnessDialects...)
		}},
		{Name: "env", Fn: func(_, v *yaml.Node) {
			list, ok := d.Texts(v, "harness.env")
			if !ok {
				return
			}
			for i, e := range list {
				name, _, _ := strings.Cut(e, "=")
				if !envNameRE.MatchString(name) {
					d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("harness.env entry %q is not NAME or NAME=value", e),
						"write a variable to pass on from mur's environment, such as ANTHROPIC_API_KEY, or one to set, such as MODE=fast")
				}
			}
			h.Env = list
		}},
		{Name: "read", Fn: func(_, v *yaml.Node) {
			list, ok := d.Texts(v, "harness.read")
			if !ok {
				return
			}
			for _, r := range list {
				if !filepath.IsAbs(r) {
					r = filepath.Join(p.c.Dir, r)
				}
				h.Read = append(h.Read, filepath.Clean(r))
			}
		}},
		{Name: "network", Fn: func(_, v *yaml.Node) { h.Network, _ = d.Flag(v, "harness.network") }},
	})
	if !ok {
		return h
	}
	if !commandSet {
		d.Missing(v.Line, "harness.command", "harness.command is missing",
			"write the harness and its arguments, such as command: [claude, -p, --output-format, stream-json, --verbose, --mcp-config, \"{mcp_config}\"]")
	}
	if !dialectSet {
		d.Missing(v.Line, "harness.dialect", "harness.dialect is missing",
			"write dialect: claude-stream-json for Claude Code, or dialect: murmur-jsonl for a harness that speaks murmur's own")
	}
	return h
}

// processChecks are the cross-key checks of transport: process: a harness: block exactly under it, and
// an agent capsule (an inference: block, which it gets when it writes none). capabilities.install under
// it is staging's E-CAP-014 (SPEC: pull-artifact and remove-artifact are refused at load).
func (p *capsuleParser) processChecks(harnessKey, transportKey, scriptKey *yaml.Node) {
	d, c := p.d, p.c
	if c.Transport != TransportProcess {
		if harnessKey != nil {
			d.Add(harnessKey.Line, "harness: is read only under transport: process",
				"add transport: process to run this harness, or remove harness:")
		}
		c.Harness = nil
		return
	}
	if harnessKey == nil {
		d.Missing(transportKey.Line, "harness", "transport: process needs a harness: block",
			"add harness: {command: [...], dialect: claude-stream-json | murmur-jsonl, resume: [--resume, \"{session}\"]}")
	}
	if scriptKey != nil {
		d.Add(scriptKey.Line, "script: is for script capsules, but transport: process runs a harness per task",
			"remove script:, or remove transport: process and harness:")
		c.Script = nil
	}
	if c.Inference == nil {
		c.Inference = &Inference{Choices: map[string]Choice{}}
	}
	if len(c.Control.AgentSettings) > 0 {
		d.Add(d.Lines["control.agent_settings"], "control.agent_settings has nothing to change under transport: process: the harness chooses its own model",
			"remove control.agent_settings")
	}
}
