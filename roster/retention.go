package roster

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// Retention says which ended tasks a member's task store keeps (store.retention in roster.yaml, for the
// whole formation, and in murmur.yaml, for one capsule). A zero field is not set.
type Retention struct {
	// MaxAge: a task that ended longer ago than this (by its last status time) is removed.
	MaxAge time.Duration
	// MaxTasks: at most this many ended tasks are kept; beyond it the oldest are removed, rejected
	// tasks before the others.
	MaxTasks int
}

// DefaultRetention is what a store keeps when neither the capsule nor the roster says: a week, so the
// tasks of the last working week can be looked up, and 10,000 tasks, which bounds the store at tens of
// megabytes (a task is a few KiB) however fast tasks arrive.
var DefaultRetention = Retention{MaxAge: 168 * time.Hour, MaxTasks: 10000}

// Or returns r with each field it does not set taken from fallback.
func (r Retention) Or(fallback Retention) Retention {
	if r.MaxAge == 0 {
		r.MaxAge = fallback.MaxAge
	}
	if r.MaxTasks == 0 {
		r.MaxTasks = fallback.MaxTasks
	}
	return r
}

// StoreSettings is the store: block: how members keep their tasks.
type StoreSettings struct {
	Retention Retention
}

var (
	storeKeys     = []string{"retention"}
	retentionKeys = []string{"max_age", "max_tasks"}
)

const exampleRetention = "store: {retention: {max_age: 168h, max_tasks: 10000}}"

func (p *parser) store(f field) StoreSettings {
	var s StoreSettings
	if !p.mapping(f, "store", exampleRetention) {
		return s
	}
	sf := p.fields(f.val, "in store", storeKeys)
	rf, ok := sf["retention"]
	if !ok || !p.mapping(rf, "store.retention", "retention: {max_age: 168h, max_tasks: 10000}") {
		return s
	}
	keys := p.fields(rf.val, "in store.retention", retentionKeys)
	if af, ok := keys["max_age"]; ok {
		if text, ok := p.text(af, "store.retention.max_age", "max_age: 168h (a week; a duration in h, m or s)", true); ok {
			d, err := time.ParseDuration(text)
			switch {
			case err != nil:
				p.add(af.key.Line, fmt.Sprintf("store.retention.max_age %q is not a duration", text),
					"write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)")
			case d < time.Second:
				p.add(af.key.Line, fmt.Sprintf("store.retention.max_age %q is shorter than a second", text),
					"write at least 1s, such as max_age: 168h, or remove the key for the default of a week")
			default:
				s.Retention.MaxAge = d
			}
		}
	}
	if nf, ok := keys["max_tasks"]; ok {
		if text, ok := p.text(nf, "store.retention.max_tasks", "max_tasks: 10000", true); ok {
			n, err := strconv.ParseInt(text, 10, 64)
			switch {
			case nf.val.ShortTag() != "!!int" || err != nil:
				p.add(nf.key.Line, fmt.Sprintf("store.retention.max_tasks must be a whole number, not %s", yamldoc.Describe(nf.val)),
					"write how many ended tasks to keep, such as max_tasks: 10000")
			case n < 1 || n > math.MaxInt32:
				p.add(nf.key.Line, fmt.Sprintf("store.retention.max_tasks must be from 1 to %d, not %d", math.MaxInt32, n),
					"write how many ended tasks to keep, such as max_tasks: 10000, or remove the key for the default of 10000")
			default:
				s.Retention.MaxTasks = int(n)
			}
		}
	}
	return s
}

// mapping reports whether f's value is a mapping, recording what to write instead when it is not.
func (p *parser) mapping(f field, what, example string) bool {
	switch {
	case yamldoc.IsNull(f.val):
		p.add(f.key.Line, what+" has no value", "write "+example+", or remove the key")
		return false
	case f.val.Kind != yaml.MappingNode:
		p.add(f.key.Line, fmt.Sprintf("%s must be a mapping of keys, not %s", what, yamldoc.Describe(f.val)), "write "+example)
		return false
	}
	return true
}
