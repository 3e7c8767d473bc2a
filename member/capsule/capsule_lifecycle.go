package capsule

import (
	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

func (p *capsuleParser) lifecycle(v *yaml.Node) {
	d, l := p.d, &p.c.Lifecycle
	secs := func(key string, dst **int) yamldoc.Field {
		return yamldoc.Field{Name: key, Fn: func(_, v *yaml.Node) {
			if n, ok := d.CountInt(v, "lifecycle."+key); ok {
				*dst = &n
			}
		}}
	}
	d.Fields(v, "lifecycle", []yamldoc.Field{
		secs("shell_grace_secs", &l.ShellGraceSecs),
		secs("deadline_notice_secs", &l.DeadlineNoticeSecs),
		secs("delegation_deadline_secs", &l.DelegationDeadlineSecs),
		secs("max_task_reopens", &l.MaxTaskReopens),
		secs("input_wait_secs", &l.InputWaitSecs),
		{Name: "keep_working", Fn: func(k, v *yaml.Node) {
			kw := &KeepWorking{}
			limit := false
			if d.Fields(v, "lifecycle.keep_working", []yamldoc.Field{{Name: "limit", Fn: func(_, v *yaml.Node) {
				limit = true
				kw.Limit = (d.CountOr0(v, "lifecycle.keep_working.limit"))
			}}}) {
				if !limit {
					d.Missing(k.Line, "lifecycle.keep_working.limit", "lifecycle.keep_working has no limit", "write keep_working: {limit: 20}")
				}
				l.KeepWorking = kw
			}
		}},
		{Name: "done_check", Fn: func(k, v *yaml.Node) {
			dc := &DoneCheck{}
			limit := false
			var cmdVal *yaml.Node
			if d.Fields(v, "lifecycle.done_check", []yamldoc.Field{
				{Name: "command", Fn: func(_, v *yaml.Node) {
					cmdVal = v
					dc.Command, _ = d.Texts(v, "lifecycle.done_check.command")
				}},
				{Name: "limit", Fn: func(_, v *yaml.Node) {
					limit = true
					dc.Limit = (d.CountOr0(v, "lifecycle.done_check.limit"))
				}},
			}) {
				p.command(k, cmdVal, dc.Command, "lifecycle.done_check.command", "command: [make, check]")
				if !limit {
					d.Missing(k.Line, "lifecycle.done_check.limit", "lifecycle.done_check has no limit", "write how often it may reopen a task, such as limit: 3")
				}
				l.DoneCheck = dc
			}
		}},
	})
}
