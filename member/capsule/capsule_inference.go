package capsule

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

var (
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	choiceNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// ExampleModels names, per model driver, a model to show in examples and hints.
	ExampleModels = map[string]string{DriverOpenAI: "gpt-4.1-mini", DriverAnthropic: "claude-sonnet-4-5"}
)

func (p *capsuleParser) inference(k, v *yaml.Node) *Inference {
	d := p.d
	inf := &Inference{Choices: map[string]Choice{}}
	var driverKey, driverVal, choicesKey *yaml.Node
	var declared []string
	ok := d.Fields(v, "inference", []yamldoc.Field{
		{Name: "driver", Fn: func(k, v *yaml.Node) {
			driverKey = k
			if s, ok := d.Text(v, "inference.driver"); ok {
				inf.Driver, driverVal = s, v
			}
		}},
		{Name: "choices", Fn: func(k, v *yaml.Node) {
			choicesKey = k
			if d.Walk(v, "inference.choices", func(k, v *yaml.Node) {
				name := k.Value
				declared = append(declared, name)
				if !choiceNameRE.MatchString(name) {
					d.Add(k.Line, fmt.Sprintf("driver choice name %q is not a plain name", name),
						"name it with letters, digits, '-', '_' or '.', such as local or gpt-mini")
					return
				}
				if ch, ok := p.choice(k, v, "inference.choices."+name); ok {
					inf.Choices[name] = ch
					inf.ChoiceOrder = append(inf.ChoiceOrder, name)
				}
			}) && len(declared) == 0 {
				d.Add(k.Line, "inference.choices declares no choice",
					"declare at least one, such as choices: {local: {driver: script}}")
			}
		}},
		{Name: "max_turns", Fn: func(_, v *yaml.Node) {
			inf.MaxTurns = d.CountOr0(v, "inference.max_turns")
		}},
		{Name: "max_session_tokens", Fn: func(_, v *yaml.Node) { inf.MaxSessionTokens, _ = d.Count(v, "inference.max_session_tokens") }},
		{Name: "compaction", Fn: func(k, v *yaml.Node) {
			set := false
			d.Fields(v, "inference.compaction", []yamldoc.Field{{Name: "threshold", Fn: func(_, v *yaml.Node) {
				set = true
				t, ok := d.Number(v, "inference.compaction.threshold")
				if !ok {
					return
				}
				if t <= 0 || t > 1 {
					d.Add(v.Line, fmt.Sprintf("inference.compaction.threshold must be more than 0 and at most 1, not %s", v.Value),
						"write the fraction of the context budget at which compaction fires, such as threshold: 0.8")
					return
				}
				inf.Compaction.Threshold = t
			}}})
			if !set && yamldoc.IsMapping(v) {
				d.Missing(k.Line, "inference.compaction.threshold", "inference.compaction has no threshold", "write compaction: {threshold: 0.8}, or remove compaction")
			}
		}},
		{Name: "tool_refresh", Fn: func(_, v *yaml.Node) {
			inf.ToolRefresh, _ = d.Enum(v, "inference.tool_refresh", ToolRefreshEveryTurn, ToolRefreshOnChange)
		}},
	})
	if !ok {
		return inf
	}
	if p.process {
		if choicesKey != nil {
			d.Add(choicesKey.Line, "inference.choices is for transport: http; under transport: process the harness runs its own model",
				"remove inference.driver and inference.choices, and configure the model in the harness's command")
		}
		return inf
	}
	if choicesKey == nil {
		d.Missing(k.Line, "inference.choices", "inference.choices is missing",
			"declare the driver choices, such as choices: {local: {driver: script}}")
	}
	switch {
	case driverKey == nil:
		fix := "name the choice the session starts on, such as driver: local"
		if len(declared) > 0 {
			fix = "name the choice the session starts on, such as driver: " + declared[0]
		}
		d.Missing(k.Line, "inference.driver", "inference.driver is missing", fix)
	case driverVal != nil && len(declared) > 0 && !slices.Contains(declared, inf.Driver):
		d.Add(driverVal.Line, fmt.Sprintf("inference.driver %q names no declared choice", inf.Driver),
			"declared choices: "+strings.Join(declared, ", ")+yamldoc.DidYouMean(inf.Driver, declared))
	}
	return inf
}

func (p *capsuleParser) choice(k, v *yaml.Node, path string) (Choice, bool) {
	d := p.d
	var ch Choice
	var scriptVal, driverVal *yaml.Node
	fix := "write driver: script, driver: openai or driver: anthropic"
	ok := d.Fields(v, path, []yamldoc.Field{
		{Name: "driver", Fn: func(_, v *yaml.Node) {
			driverVal = v
			ch.Driver, _ = d.Enum(v, path+".driver", DriverScript, DriverOpenAI, DriverAnthropic)
		}},
		{Name: "model", Fn: func(_, v *yaml.Node) { ch.Model, _ = d.Text(v, path+".model") }},
		{Name: "base_url", Fn: func(_, v *yaml.Node) {
			s, ok := d.Text(v, path+".base_url")
			if !ok {
				return
			}
			ch.BaseURL = s
			if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				d.Add(v.Line, fmt.Sprintf("%s.base_url %q is not an http or https URL", path, s),
					"write the API's base URL, such as base_url: http://127.0.0.1:11434/v1")
			}
		}},
		{Name: "credential", Fn: func(_, v *yaml.Node) {
			s, ok := d.Text(v, path+".credential")
			if !ok {
				return
			}
			ch.Credential = s
			// The value is never quoted back: a key written here by mistake must not reach a log.
			switch name, isEnv := strings.CutPrefix(s, "env:"); {
			case isEnv && envNameRE.MatchString(name):
			case isEnv:
				d.Add(v.Line, path+".credential names no valid environment variable after env:",
					"write credential: env:NAME with NAME made of letters, digits and '_', such as env:OPENAI_API_KEY")
			case strings.HasPrefix(s, "file:") && len(s) > len("file:"):
			default:
				d.Add(v.Line, path+".credential is neither env:NAME nor file:PATH",
					"write credential: env:OPENAI_API_KEY to read the key from the environment, or credential: file:/run/secrets/key to read it from a file; never write the key itself in murmur.yaml")
			}
		}},
		{Name: "script", Fn: func(_, v *yaml.Node) {
			if s, ok := d.Text(v, path+".script"); ok {
				ch.Script, scriptVal = s, v
			}
		}},
		{Name: "context_window", Fn: func(_, v *yaml.Node) { ch.ContextWindow = (d.CountOr0(v, path+".context_window")) }},
		{Name: "max_output_tokens", Fn: func(_, v *yaml.Node) { ch.MaxOutputTokens = (d.CountOr0(v, path+".max_output_tokens")) }},
		{Name: "max_input_tokens", Fn: func(_, v *yaml.Node) { ch.MaxInputTokens = (d.CountOr0(v, path+".max_input_tokens")) }},
	})
	if !ok {
		return ch, false
	}
	if driverVal == nil {
		d.Missing(k.Line, path+".driver", path+".driver is missing", fix)
	}
	switch ch.Driver {
	case DriverOpenAI, DriverAnthropic:
		if ch.Model == "" {
			d.Add(k.Line, fmt.Sprintf("%s uses driver %s but names no model", path, ch.Driver),
				"add the model, such as model: "+ExampleModels[ch.Driver])
		}
		if scriptVal != nil {
			d.Add(scriptVal.Line, fmt.Sprintf("%s.script applies only to driver: script, not %s", path, ch.Driver),
				"remove script:, or set driver: script")
		}
	case DriverScript:
		if scriptVal != nil {
			p.scriptFile(scriptVal, path, ch.Script)
		}
	}
	if ch.ContextWindow > 0 && ch.MaxOutputTokens >= ch.ContextWindow {
		d.Add(d.Lines[path+".max_output_tokens"], fmt.Sprintf("%s.max_output_tokens (%d) leaves no room for input in context_window (%d)", path, ch.MaxOutputTokens, ch.ContextWindow),
			"make max_output_tokens smaller than context_window")
	}
	return ch, true
}

func (p *capsuleParser) scriptFile(v *yaml.Node, path, name string) {
	d := p.d
	if strings.TrimSpace(name) == "" {
		d.Add(v.Line, path+".script is empty", "name the script file, such as script: script.yaml, or remove the key to use the embedded default")
		return
	}
	file := ResolvePath(p.c.Dir, name)
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.Add(v.Line, fmt.Sprintf("%s.script %q does not exist (looked for %s)", path, name, file),
			"create it, write its path relative to the capsule directory, or remove script: to use the embedded default")
	case err != nil:
		d.Add(v.Line, fmt.Sprintf("%s.script %q cannot be read: %v", path, name, err), "make the file readable")
	case fi.IsDir():
		d.Add(v.Line, fmt.Sprintf("%s.script %q is a directory", path, name), "name the script.yaml file itself")
	}
}
