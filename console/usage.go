package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// UsageTokens are the tokens of some inference calls as a task's metadata.murmur.usage spells them
// (DESIGN §17): what the providers reported, how many calls there were and how many reported nothing.
type UsageTokens struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	Cached     int64 `json:"cached"`
	CacheWrite int64 `json:"cache_write"`
	Calls      int64 `json:"calls"`
	Unreported int64 `json:"unreported_calls"`
}

// Short is the input and output tokens: "1200 in · 80 out".
func (t UsageTokens) Short() string { return fmt.Sprintf("%d in · %d out", t.Input, t.Output) }

// String is every count that is not zero, the calls last.
func (t UsageTokens) String() string {
	s := t.Short()
	if t.Cached > 0 {
		s += fmt.Sprintf(" · %d cached", t.Cached)
	}
	if t.CacheWrite > 0 {
		s += fmt.Sprintf(" · %d written to the cache", t.CacheWrite)
	}
	s += fmt.Sprintf(" · %d inference call(s)", t.Calls)
	if t.Unreported > 0 {
		s += fmt.Sprintf(", %d reported no tokens", t.Unreported)
	}
	return s
}

// Usage is a task's metadata.murmur.usage: its own tokens, those of the tasks and sub-sessions it
// caused (Tasks of them, at every depth), and their sum.
type Usage struct {
	Self   UsageTokens `json:"self"`
	Caused UsageTokens `json:"caused"`
	Total  UsageTokens `json:"total"`
	Tasks  int64       `json:"caused_tasks"`
}

// usageOf reads a task's metadata.murmur.usage; nil when it reports none (a task that never ran, or
// one a member of an earlier version ran).
func usageOf(t *a2a.Task) *Usage {
	mm, _ := t.Metadata["murmur"].(map[string]any)
	v, ok := mm["usage"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var u Usage
	if json.Unmarshal(b, &u) != nil {
		return nil
	}
	return &u
}

// traceIDOf reads a task's metadata.murmur.trace_id: the trace its run is in, when it ran in a
// recorded span.
func traceIDOf(t *a2a.Task) string {
	mm, _ := t.Metadata["murmur"].(map[string]any)
	id, _ := mm["trace_id"].(string)
	if !traceIDForm.MatchString(id) {
		return ""
	}
	return id
}

// TracePlaceholder is what Config.TraceURL names a trace by.
const TracePlaceholder = "{trace_id}"

// checkTraceURL refuses a trace UI template that would make no link: it must be an http or https URL
// naming the trace by TracePlaceholder.
func checkTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, TracePlaceholder, "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(tmpl, TracePlaceholder) {
		return fmt.Errorf("console: the trace UI URL %q is not an http(s) URL naming the trace by %s, such as http://localhost:16686/trace/%s", cut(tmpl, 200), TracePlaceholder, TracePlaceholder)
	}
	return nil
}

// traceLink is the trace UI's page of trace id; "" without a template or a trace.
func (c *Console) traceLink(id string) string {
	if c.cfg.TraceURL == "" || id == "" {
		return ""
	}
	return strings.ReplaceAll(c.cfg.TraceURL, TracePlaceholder, id)
}

// requestOf fills in the tree of tasks v's request caused, from the records, and when the request's
// root is another task, what its door says the whole request used.
func (c *Console) requestOf(ctx context.Context, v *TaskView) {
	v.Tree = c.records.tree(v.ID, v.Member)
	if len(v.Tree) == 0 || v.Tree[0].Current {
		return
	}
	root := v.Tree[0]
	v.Request = &root
	if m := c.byName[root.Member]; m != nil {
		zero := 0
		if t, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(root.ID), HistoryLength: &zero}); err == nil {
			v.RequestUsage = usageOf(t)
			if v.TraceID == "" {
				v.TraceID = traceIDOf(t)
				v.TraceURL = c.traceLink(v.TraceID)
			}
		}
	}
}
