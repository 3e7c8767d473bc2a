// Package plan is submit-plan (DESIGN §12, SPEC "Plans"): it parses and checks a plan (Parse, Check:
// 1 to 32 steps, unique ids, no tool that is not callable from a step, no unknown tool, no reference to
// a later or unknown step; every refusal names the step and comes before any step runs), resolves the
// references ${<id>.output} and ${<id>.data.<key>} in each step's input from the results of the steps
// before it, runs the steps in order through a dispatch func the session hands in (so the allowlist,
// hooks and records apply as for any call), and renders the plan's result. A plan that runs is a span,
// murmur.plan, the child of the submit-plan call's span, and each step's execute_tool span is its child.
//
// Imports: runtimetools, and for the span internal/telemetry/conv and member/spans/nest; never member.
package plan
