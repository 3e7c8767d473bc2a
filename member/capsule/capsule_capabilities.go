package capsule

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

func (p *capsuleParser) capabilities(v *yaml.Node) {
	d, c := p.d, &p.c.Capabilities
	allow := func(path string, dst *AllowList, check func(v *yaml.Node, i int, s string), extra ...yamldoc.Field) yamldoc.Field {
		return yamldoc.Field{Name: yamldoc.LastKey(path), Fn: func(_, v *yaml.Node) {
			d.Fields(v, path, append([]yamldoc.Field{{Name: "allow", Fn: func(_, v *yaml.Node) {
				list, ok := d.Texts(v, path+".allow")
				if !ok {
					return
				}
				dst.Allow = list
				for i, s := range list {
					if strings.TrimSpace(s) == "" {
						d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("%s.allow[%d] is empty", path, i), "remove the empty entry")
					} else if check != nil {
						check(v, i, s)
					}
				}
			}}}, extra...))
		}}
	}
	d.Fields(v, "capabilities", []yamldoc.Field{
		allow("capabilities.shell", &c.Shell.AllowList, func(v *yaml.Node, i int, s string) {
			if strings.ContainsAny(s, "/\\") || strings.ContainsFunc(s, isBlankRune) {
				bare := s
				if f := strings.Fields(s); len(f) > 0 {
					bare = filepath.Base(f[0])
				}
				d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("capabilities.shell.allow entry %q is not a bare program name", s),
					fmt.Sprintf("write the name alone, such as %s: the runtime finds it on PATH, and the model passes arguments with each call", bare))
			}
		},
			yamldoc.Field{Name: "confine", Fn: func(_, v *yaml.Node) {
				if b, ok := d.Flag(v, "capabilities.shell.confine"); ok {
					c.Shell.Confine = &b
				}
			}},
			yamldoc.Field{Name: "timeout_secs", Fn: func(_, v *yaml.Node) { c.Shell.TimeoutSecs = d.CountOr0(v, "capabilities.shell.timeout_secs") }},
			yamldoc.Field{Name: "memory_mb", Fn: func(_, v *yaml.Node) { c.Shell.MemoryMB = d.CountOr0(v, "capabilities.shell.memory_mb") }},
			yamldoc.Field{Name: "output_kb", Fn: func(_, v *yaml.Node) { c.Shell.OutputKB = d.CountOr0(v, "capabilities.shell.output_kb") }},
			yamldoc.Field{Name: "read", Fn: func(_, v *yaml.Node) { c.Shell.Read = p.readPaths(v) }},
			yamldoc.Field{Name: "network", Fn: func(_, v *yaml.Node) { c.Shell.Network, _ = d.Flag(v, "capabilities.shell.network") }},
		),
		allow("capabilities.spawn", &c.Spawn, nil),
		{Name: "plan", Fn: func(_, v *yaml.Node) {
			d.Fields(v, "capabilities.plan", []yamldoc.Field{{Name: "submit", Fn: func(_, v *yaml.Node) {
				c.Plan.Submit, _ = d.Flag(v, "capabilities.plan.submit")
			}}})
		}},
		{Name: "peer_fetch", Fn: func(_, v *yaml.Node) { p.peerFetch(v) }},
		allow("capabilities.network", &c.Network, nil),
		{Name: "install", Fn: func(_, v *yaml.Node) { p.install(v) }},
		{Name: "hooks", Fn: func(_, v *yaml.Node) {
			d.Fields(v, "capabilities.hooks", []yamldoc.Field{{Name: "inference", Fn: func(_, v *yaml.Node) {
				c.Hooks.Inference, _ = d.Flag(v, "capabilities.hooks.inference")
			}}})
		}},
	})
}

// readPaths checks capabilities.shell.read: each entry an existing path, absolute or relative to the
// capsule directory, returned absolute and clean.
func (p *capsuleParser) readPaths(v *yaml.Node) []string {
	d := p.d
	list, ok := d.Texts(v, "capabilities.shell.read")
	if !ok {
		return nil
	}
	var out []string
	for i, s := range list {
		line := yamldoc.ItemLine(v, i)
		if strings.TrimSpace(s) == "" {
			d.Add(line, fmt.Sprintf("capabilities.shell.read[%d] is empty", i), "remove the empty entry")
			continue
		}
		abs := filepath.Clean(ResolvePath(p.c.Dir, s))
		if _, err := os.Stat(abs); err != nil {
			d.Add(line, fmt.Sprintf("capabilities.shell.read entry %q does not exist (looked for %s)", s, abs),
				"create it, write its path absolute or relative to the capsule directory, or remove the entry")
			continue
		}
		out = append(out, abs)
	}
	return out
}

// peerFetch reads capabilities.peer_fetch: true or false, or a mapping (which grants it) with max_mb.
func (p *capsuleParser) peerFetch(v *yaml.Node) {
	d, c := p.d, &p.c.Capabilities
	if !yamldoc.IsMapping(v) {
		c.PeerFetch, _ = d.Flag(v, "capabilities.peer_fetch")
		return
	}
	c.PeerFetch = true
	d.Fields(v, "capabilities.peer_fetch", []yamldoc.Field{{Name: "max_mb", Fn: func(_, v *yaml.Node) {
		if n, ok := d.CountInt(v, "capabilities.peer_fetch.max_mb"); ok {
			if n == 0 {
				d.Add(v.Line, "capabilities.peer_fetch.max_mb is 0, so no file could be fetched",
					"write at least 1, such as max_mb: 64, or remove the key for the default of 64")
				return
			}
			c.PeerFetchMaxMB = n
		}
	}}})
}

// install reads capabilities.install: the patterns (tool, skill, from) pull-artifact and remove-artifact
// are granted for.
func (p *capsuleParser) install(v *yaml.Node) {
	d, c := p.d, &p.c.Capabilities
	list := func(key string, dst *[]string) yamldoc.Field {
		return yamldoc.Field{Name: key, Fn: func(_, v *yaml.Node) {
			path := "capabilities.install." + key
			l, ok := d.Texts(v, path)
			if !ok {
				return
			}
			*dst = l
			for i, s := range l {
				if strings.TrimSpace(s) == "" {
					d.Add(yamldoc.ItemLine(v, i), fmt.Sprintf("%s[%d] is empty", path, i), "remove the empty entry")
				}
			}
		}}
	}
	d.Fields(v, "capabilities.install", []yamldoc.Field{
		list("tool", &c.Install.Tool), list("skill", &c.Install.Skill), list("from", &c.Install.From),
	})
}

func isBlankRune(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
