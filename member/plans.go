package member

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/plan"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/runtimetools"
)

// RunPlan runs one submit-plan call (runtimetools.PlanRunner): each step through this session's own
// dispatch, with its hooks, allowlist and records, but without the deadline notice, which rides on the
// plan's own result.
func (s *Session) RunPlan(ctx context.Context, call runtimetools.Call) runtimetools.Result {
	return plan.Run(ctx, plan.Config{
		Known:     func(name string) bool { return slices.Contains(s.inventory(), name) },
		Inventory: s.inventory,
		Dispatch: func(ctx context.Context, step, tool string, input json.RawMessage) (string, string, any) {
			r := s.dispatchCall(ctx, call.Task, driver.ToolCall{ID: call.ID + "." + step, Name: tool, Input: input}, true)
			return r.Status, r.Output, r.Data
		},
		Record: func(fields map[string]any) {
			fields["call_id"] = call.ID
			// A record the trace cannot take is lost; the work it records goes on without it.
			_ = s.records.Write(records.TypePlan, call.Task, fields)
		},
	}, call.Input)
}
