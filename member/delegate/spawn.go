package delegate

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/capsule"
)

// MaxDepth is how deep a chain of delegations may go: a member's sub-capsule is at depth 1, and one at
// depth MaxDepth delegates no further (E-CAP-020 at staging when a chain is deeper).
const MaxDepth = 3

// Entry is one capabilities.spawn.allow entry, resolved to the capsule it names.
type Entry struct {
	Spec    string           // the entry as murmur.yaml writes it: ./summarizer or local/summarizer
	Name    string           // the bare part: what delegate-task's capsule field takes
	Capsule *capsule.Capsule // the sub-capsule, loaded and validated
}

// IsDirEntry reports whether a spawn.allow entry names a capsule directory (relative or absolute path)
// rather than a runtime: capsule artifact (scope/name[@version]).
func IsDirEntry(spec string) bool {
	return strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || !strings.Contains(spec, "/")
}

// BareName is the part of a spawn.allow entry after its last /, without a version.
func BareName(spec string) string {
	s := strings.TrimRight(spec, "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Resolve loads every sub-capsule c's spawn.allow names, in its order: a directory relative to c's
// own, or a runtime: capsule artifact found in stores (the project store, then the global one). Every
// entry that cannot be used is reported, each naming the entry and what to change.
func Resolve(c *capsule.Capsule, stores []artifact.Store) ([]Entry, error) {
	var out []Entry
	var errs []string
	seen := map[string]string{}
	for _, spec := range c.Capabilities.Spawn.Allow {
		name := BareName(spec)
		if prev, dup := seen[name]; dup {
			errs = append(errs, fmt.Sprintf("%s: capabilities.spawn.allow lists %s and %s, which share the bare name %q that delegate-task names them by; keep one", c.Path, prev, spec, name))
			continue
		}
		seen[name] = spec
		dir, err := entryDir(c, spec, stores)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: capabilities.spawn.allow entry %s: %v", c.Path, spec, err))
			continue
		}
		sub, err := capsule.Load(dir)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: capabilities.spawn.allow entry %s: %v", c.Path, spec, err))
			continue
		}
		out = append(out, Entry{Spec: spec, Name: name, Capsule: sub})
	}
	if len(errs) > 0 {
		return out, &SpawnError{Msgs: errs}
	}
	return out, nil
}

// SpawnError lists what is wrong with a capsule's spawn.allow entries.
type SpawnError struct{ Msgs []string }

func (e *SpawnError) Error() string { return strings.Join(e.Msgs, "\n") }

// entryDir is the capsule directory one entry names.
func entryDir(c *capsule.Capsule, spec string, stores []artifact.Store) (string, error) {
	if IsDirEntry(spec) {
		return capsule.ResolvePath(c.Dir, spec), nil
	}
	ref, err := artifact.ParseRef(spec)
	if err != nil {
		return "", fmt.Errorf("%v (a sub-capsule is a directory such as ./summarizer, or a runtime: capsule artifact such as local/summarizer)", err)
	}
	a, _, err := artifact.Resolve(stores, ref)
	if err != nil {
		return "", err
	}
	if a.Manifest.Runtime != artifact.RuntimeCapsule {
		return "", fmt.Errorf("%s is an artifact of runtime: %s, not a capsule; delegate-task hands tasks only to runtime: capsule artifacts and capsule directories", ref, a.Manifest.Runtime)
	}
	return filepath.Join(a.Dir, a.Manifest.Capsule), nil
}

// Chain returns the deepest chain of delegations that starts at c (c itself at depth 0), as the bare
// names along it, followed no further than one step past MaxDepth, so a cycle shows as a chain one step
// too deep; and what is wrong with any spawn.allow entry along the way, c's own and its sub-capsules',
// each once.
func Chain(c *capsule.Capsule, stores func(*capsule.Capsule) []artifact.Store) (chain, problems []string) {
	seen := map[string]bool{}
	var walk func(c *capsule.Capsule, path []string)
	walk = func(c *capsule.Capsule, path []string) {
		if len(path) > len(chain) {
			chain = append([]string(nil), path...)
		}
		if len(path) > MaxDepth {
			return
		}
		entries, err := Resolve(c, stores(c))
		var se *SpawnError
		if errors.As(err, &se) {
			for _, m := range se.Msgs {
				if !seen[m] {
					seen[m] = true
					problems = append(problems, m)
				}
			}
		}
		for _, e := range entries {
			walk(e.Capsule, append(path[:len(path):len(path)], e.Name))
		}
	}
	walk(c, nil)
	return chain, problems
}
