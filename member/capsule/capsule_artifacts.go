package capsule

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// artifactRE matches an artifact name, scope/name[@version].
var artifactRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*(@[0-9A-Za-z][0-9A-Za-z.+_-]*)?$`)

// artifacts reads a list of artifact names, scope/name[@version].
func (p *capsuleParser) artifacts(v *yaml.Node, path, example string) []string {
	d := p.d
	list, ok := d.Texts(v, path)
	if !ok {
		return nil
	}
	seen := map[string]int{}
	for i, s := range list {
		line := yamldoc.ItemLine(v, i)
		d.Lines[fmt.Sprintf("%s[%d]", path, i)] = line
		if !artifactRE.MatchString(s) {
			d.Add(line, fmt.Sprintf("%s entry %q is not an artifact name", path, s),
				"write scope/name or scope/name@version in lowercase, such as "+example)
			continue
		}
		if first, dup := seen[s]; dup {
			d.Add(line, fmt.Sprintf("%s lists %q twice (first at line %d)", path, s, first), "remove one")
		}
		seen[s] = line
	}
	return list
}
