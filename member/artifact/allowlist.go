package artifact

import (
	"slices"
	"sync"
)

// Allowlist is the dispatch allowlist of a session: the tool names of its tool artifacts, declared and
// pulled, each held by one full name. A call to a tool artifact whose name is not on it is refused.
// Runtime-provided tools never consult it. The zero value is empty and ready; it is safe for concurrent
// use.
type Allowlist struct {
	mu    sync.RWMutex
	names map[string]Name // tool name -> the full name holding it
}

// Add puts name's tool name on the list. A tool name another artifact already holds is a not-granted
// *Refusal (SPEC: "a tool name another artifact of the session holds"); adding the same name again is
// nothing.
func (a *Allowlist) Add(name Name) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	tool := name.Tool()
	if held, ok := a.names[tool]; ok && held != name {
		return refuse(NotGranted, "the tool name %s is already held by %s, another artifact of this session; %s cannot be added beside it",
			tool, held, name)
	}
	if a.names == nil {
		a.names = map[string]Name{}
	}
	a.names[tool] = name
	return nil
}

// Remove takes a tool name off the list, reporting the full name that held it.
func (a *Allowlist) Remove(tool string) (Name, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	name, ok := a.names[tool]
	delete(a.names, tool)
	return name, ok
}

// Contains reports whether a tool artifact named tool may be dispatched.
func (a *Allowlist) Contains(tool string) bool {
	_, ok := a.Lookup(tool)
	return ok
}

// Lookup returns the full name holding tool.
func (a *Allowlist) Lookup(tool string) (Name, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	name, ok := a.names[tool]
	return name, ok
}

// Names returns the tool names on the list, sorted.
func (a *Allowlist) Names() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]string, 0, len(a.names))
	for t := range a.names {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
