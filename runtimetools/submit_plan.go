package runtimetools

import (
	"context"
	"encoding/json"
)

// PlanRunner is what submit-plan needs of the session: it checks the plan, runs its steps against the
// session's own dispatch and renders the result.
type PlanRunner interface {
	RunPlan(ctx context.Context, call Call) Result
}

// SubmitPlan is the submit-plan tool, staged when capabilities.plan.submit is true.
type SubmitPlan struct {
	Runner PlanRunner
}

// planSchema is submit-plan's input: 1 to 32 steps, ids of [a-z0-9_-]+, on_error stop or continue.
const planSchema = `{"type":"object","properties":{` +
	`"steps":{"type":"array","minItems":1,"maxItems":32,"description":"the steps, run in order","items":{"type":"object","properties":{` +
	`"id":{"type":"string","pattern":"^[a-z0-9_-]+$","description":"unique within the plan; later steps refer to this step's result as ${<id>.output} or ${<id>.data.<key>}"},` +
	`"tool":{"type":"string","description":"the tool this step calls"},` +
	`"input":{"type":"object","description":"the tool's input; any string in it may hold ${<id>.output} or ${<id>.data.<key>} of an earlier step"}},` +
	`"required":["id","tool"]}},` +
	`"on_error":{"type":"string","enum":["stop","continue"],"description":"after a step fails: stop skips the rest (default), continue runs them"}},` +
	`"required":["steps"]}`

// Manifest describes submit-plan.
func (t *SubmitPlan) Manifest() Manifest {
	return NativeManifest("submit-plan",
		"Runs a plan: several calls of this session's own tools, in order, in one tool call, and returns every step's result. "+
			"A step's input may use an earlier step's result: ${<id>.output}, or ${<id>.data.<key>}. "+
			"submit-plan, switch-driver, pull-artifact, remove-artifact and end-without-answer cannot be plan steps. "+
			"A plan with such a step, an unknown tool or a reference to a step that is not an earlier one is refused before any step runs.",
		json.RawMessage(planSchema))
}

// Run runs the plan.
func (t *SubmitPlan) Run(ctx context.Context, call Call) (Result, error) {
	return t.Runner.RunPlan(ctx, call), nil
}
