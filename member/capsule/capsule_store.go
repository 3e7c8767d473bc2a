package capsule

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// store reads store.retention: how long, and how many, ended tasks this member's store keeps.
func (p *capsuleParser) store(v *yaml.Node) {
	d, r := p.d, &p.c.Store.Retention
	d.Fields(v, "store", []yamldoc.Field{{Name: "retention", Fn: func(_, v *yaml.Node) {
		d.Fields(v, "store.retention", []yamldoc.Field{
			{Name: "max_age", Fn: func(_, v *yaml.Node) {
				s, ok := d.Text(v, "store.retention.max_age")
				if !ok {
					return
				}
				age, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.Add(v.Line, fmt.Sprintf("store.retention.max_age %q is not a duration", s),
						"write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)")
				case age < time.Second:
					d.Add(v.Line, fmt.Sprintf("store.retention.max_age %q is shorter than a second", s),
						"write at least 1s, such as max_age: 168h, or remove the key to keep the roster's (or the default of a week)")
				default:
					r.MaxAge = age
				}
			}},
			{Name: "max_tasks", Fn: func(_, v *yaml.Node) {
				n, ok := d.CountInt(v, "store.retention.max_tasks")
				switch {
				case !ok:
				case n == 0:
					d.Add(v.Line, "store.retention.max_tasks is 0, so no ended task could be kept",
						"write at least 1, such as max_tasks: 10000, or remove the key to keep the roster's (or the default of 10000)")
				default:
					r.MaxTasks = n
				}
			}},
		})
	}}})
}
