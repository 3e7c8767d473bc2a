package stage

import (
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/delegate"
)

// The codes of delegate-task's staging (DESIGN §11).
const (
	CodeSpawnDepth   = "E-CAP-020" // a chain of delegations deeper than delegate.MaxDepth
	CodeSpawnMissing = "E-CAP-021" // a capabilities.spawn.allow entry that is no capsule this mur can start
)

// spawnFindings checks c's capabilities.spawn.allow and its sub-capsules': every entry is a capsule
// (E-CAP-021), and no chain of delegations from c goes deeper than delegate.MaxDepth (E-CAP-020).
func spawnFindings(c *capsule.Capsule, memberName, projectDir string, getenv func(string) string) []Finding {
	if len(c.Capabilities.Spawn.Allow) == 0 {
		return nil
	}
	stores := artifactStores(projectDir, getenv)
	var out []Finding
	chain, problems := delegate.Chain(c, func(*capsule.Capsule) []artifact.Store { return stores })
	for _, p := range problems {
		out = append(out, Finding{Code: CodeSpawnMissing, Member: memberName, Message: p})
	}
	if len(chain) > delegate.MaxDepth {
		out = append(out, Finding{Code: CodeSpawnDepth, Member: memberName, Message: fmt.Sprintf(
			"%s: delegations can chain %s, %d deep; a chain may be at most %d deep (a member's sub-capsule is depth 1): remove capabilities.spawn.allow from the sub-capsule at depth %d",
			c.Path, strings.Join(chain, " -> "), len(chain), delegate.MaxDepth, delegate.MaxDepth)})
	}
	return out
}
