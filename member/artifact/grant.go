package artifact

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The places capabilities.install.from may name.
const (
	FromStores  = "stores"
	FromSources = "sources"
)

// Grant is a capsule's capabilities.install: the patterns of each tier and where pulls may come from.
// A nil *Grant is a capsule without capabilities.install: every check refuses it.
type Grant struct {
	Tool    []Pattern
	Skill   []Pattern
	Sources bool // from: [stores, sources]: a version no store holds is fetched from the scope's source
}

// NewGrant builds the grant of capabilities.install.{tool, skill, from}. from is [stores] (also when
// empty) or [stores, sources].
func NewGrant(tool, skill, from []string) (*Grant, error) {
	g := &Grant{}
	var errs []error
	var err error
	if g.Tool, err = ParsePatterns(tool); err != nil {
		errs = append(errs, fmt.Errorf("capabilities.install.tool: %w", err))
	}
	if g.Skill, err = ParsePatterns(skill); err != nil {
		errs = append(errs, fmt.Errorf("capabilities.install.skill: %w", err))
	}
	seen := map[string]bool{}
	for _, f := range from {
		switch {
		case f != FromStores && f != FromSources:
			errs = append(errs, fmt.Errorf("capabilities.install.from: %q is not a place to pull from; write from: [stores] or from: [stores, sources]", f))
		case seen[f]:
			errs = append(errs, fmt.Errorf("capabilities.install.from lists %s twice; keep one", f))
		}
		seen[f] = true
	}
	if seen[FromSources] && !seen[FromStores] {
		errs = append(errs, errors.New("capabilities.install.from lists sources without stores; write from: [stores, sources]: the stores are always looked in first"))
	}
	g.Sources = seen[FromSources]
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// Summary names the grant as refusals and pull-artifact's description do:
// "capabilities.install.tool: local/*; capabilities.install.skill: none; capabilities.install.from: stores".
func (g *Grant) Summary() string {
	if g == nil {
		return "no capabilities.install"
	}
	list := func(ps []Pattern) string {
		if len(ps) == 0 {
			return "none"
		}
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		return strings.Join(s, ", ")
	}
	from := FromStores
	if g.Sources {
		from += ", " + FromSources
	}
	return fmt.Sprintf("capabilities.install.tool: %s; capabilities.install.skill: %s; capabilities.install.from: %s", list(g.Tool), list(g.Skill), from)
}

func noInstall() *Refusal {
	return refuse(NotGranted, "this capsule declares no capabilities.install, so it may pull nothing")
}

// CheckName is the check pull-artifact makes before anything is read: s must be a full name, with or
// without a version, whose tool name is not reserved (E-CAP-013), and that an entry of either tier
// names. It returns the parsed name, or a not-granted *Refusal.
func (g *Grant) CheckName(s string) (Ref, error) {
	if g == nil {
		return Ref{}, noInstall()
	}
	ref, err := ParseRef(s)
	if err != nil {
		return Ref{}, &Refusal{Kind: NotGranted, Msg: err.Error(), Err: err}
	}
	if err := CheckReserved(string(ref.Name)); err != nil {
		return Ref{}, &Refusal{Kind: NotGranted, Code: CodeReserved, Msg: strings.TrimPrefix(err.Error(), CodeReserved+": "), Err: err}
	}
	if !matchAny(g.Tool, ref.Name) && !matchAny(g.Skill, ref.Name) {
		return Ref{}, refuse(NotGranted, "%s is outside this capsule's grant (%s)", ref.Name, g.Summary())
	}
	return ref, nil
}

// CheckRuntime is the check once the artifact's murmur.yaml is read: only tools and skills are pulled,
// and the entry naming it must be of its own tier. It returns nil or a not-granted *Refusal.
func (g *Grant) CheckRuntime(rt Runtime, name Name) error {
	if g == nil {
		return noInstall()
	}
	var tier []Pattern
	switch rt {
	case RuntimeTool:
		tier = g.Tool
	case RuntimeSkill:
		tier = g.Skill
	case RuntimeHook:
		return refuse(NotGranted, "%s is a hook; hooks and drivers are never pulled in a session: the operator declares hooks in murmur.yaml (hooks:)", name)
	case RuntimeDriver:
		return refuse(NotGranted, "%s is a driver; hooks and drivers are never pulled in a session: the operator declares driver choices in murmur.yaml (inference.choices)", name)
	default:
		return refuse(NotGranted, "%s is a %s; only tools and skills are pulled in a session", name, rt)
	}
	if !matchAny(tier, name) {
		return refuse(NotGranted, "%s is a %s, and capabilities.install.%s does not name it (%s)", name, rt, rt, g.Summary())
	}
	return nil
}

// Allows reports whether an artifact of runtime rt named name may be pulled: what a listing shows.
func (g *Grant) Allows(rt Runtime, name Name) bool {
	return g != nil && g.CheckRuntime(rt, name) == nil
}

// CheckPattern is the check of a listing: s must be a pattern that reaches a name some grant entry
// names. It returns the parsed pattern, or a not-granted *Refusal.
func (g *Grant) CheckPattern(s string) (Pattern, error) {
	if g == nil {
		return Pattern{}, noInstall()
	}
	p, err := ParsePattern(s)
	if err != nil {
		return Pattern{}, &Refusal{Kind: NotGranted, Msg: err.Error(), Err: err}
	}
	if !slices.ContainsFunc(g.Tool, p.Overlaps) && !slices.ContainsFunc(g.Skill, p.Overlaps) {
		return Pattern{}, refuse(NotGranted, "pattern %s reaches no name this capsule may pull (%s)", p, g.Summary())
	}
	return p, nil
}

func matchAny(ps []Pattern, n Name) bool {
	return slices.ContainsFunc(ps, func(p Pattern) bool { return p.Match(n) })
}
