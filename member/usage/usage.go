package usage

import (
	"encoding/json"

	"github.com/murmur-run/murmur/internal/ids"
)

// Tokens are the sums of some inference calls: the tokens their providers reported (cached reads and
// cache writes where the provider reports them), how many calls there were, and how many of them
// reported nothing (their tokens are in no sum).
type Tokens struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	Cached     int64 `json:"cached"`
	CacheWrite int64 `json:"cache_write"`
	Calls      int64 `json:"calls"`
	Unreported int64 `json:"unreported_calls"`
}

// Add returns the sum of t and o.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{Input: t.Input + o.Input, Output: t.Output + o.Output, Cached: t.Cached + o.Cached,
		CacheWrite: t.CacheWrite + o.CacheWrite, Calls: t.Calls + o.Calls, Unreported: t.Unreported + o.Unreported}
}

// Count adds one inference call to t: what its provider reported, or a call that reported nothing.
func (t *Tokens) Count(reported bool, in, out, cached, cacheWrite int64) {
	t.Calls++
	if !reported {
		t.Unreported++
		return
	}
	t.Input += in
	t.Output += out
	t.Cached += cached
	t.CacheWrite += cacheWrite
}

// Usage is a task's metadata.murmur.usage: its own tokens, those of the tasks and sub-sessions it
// caused, and their sum. Tasks counts the tasks and sub-sessions in Caused, at every depth.
type Usage struct {
	Self   Tokens `json:"self"`
	Caused Tokens `json:"caused"`
	Total  Tokens `json:"total"`
	Tasks  int64  `json:"caused_tasks"`
}

// Of returns the Usage of self and caused, Total their sum.
func Of(self, caused Tokens, tasks int64) Usage {
	return Usage{Self: self, Caused: caused, Total: self.Add(caused), Tasks: tasks}
}

// Meta is u as metadata holds it: JSON's own types (numbers are float64), as a task read back from the
// store has them. It is built field by field, with the names of the JSON tags: every running task's
// metadata is stamped with it at each step, and a JSON round trip cost more than the rest of a step.
func (u Usage) Meta() map[string]any {
	return map[string]any{"self": u.Self.meta(), "caused": u.Caused.meta(), "total": u.Total.meta(),
		"caused_tasks": float64(u.Tasks)}
}

func (t Tokens) meta() map[string]any {
	return map[string]any{"input": float64(t.Input), "output": float64(t.Output), "cached": float64(t.Cached),
		"cache_write": float64(t.CacheWrite), "calls": float64(t.Calls), "unreported_calls": float64(t.Unreported)}
}

// Set puts u in metadata.murmur m.
func Set(m map[string]any, u Usage) { ids.Set(m, ids.MetaUsage, u.Meta()) }

// Read returns the usage metadata.murmur m reports, and whether it reports one: a task that ran on a
// member of this version reports it; one that never ran (rejected, canceled in the queue) or that a
// member of an earlier version ran does not.
func Read(m map[string]any) (Usage, bool) {
	v, ok := ids.Lookup(m, ids.MetaUsage)
	if !ok || v == nil {
		return Usage{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Usage{}, false
	}
	var u Usage
	if json.Unmarshal(b, &u) != nil {
		return Usage{}, false
	}
	return u, true
}
