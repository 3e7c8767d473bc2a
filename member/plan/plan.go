package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/internal/telemetry/conv"
	"github.com/murmur-run/murmur/member/spans/nest"
	"github.com/murmur-run/murmur/runtimetools"
)

// The bounds of a plan.
const (
	MaxSteps  = 32
	ResultMax = 64 << 10 // the whole result, as the model sees it inside the fence
)

// The values of on_error.
const (
	OnErrorStop     = "stop"
	OnErrorContinue = "continue"
)

// The statuses of a step.
const (
	StepOK      = "ok"
	StepError   = "error"
	StepSkipped = "skipped"
)

// Guidance is the runtime's plan guidance, part of the system prompt exactly when submit-plan exists.
const Guidance = "## Plans\n" +
	"When several tool calls depend on each other and need no judgement between them, submit them as one plan with submit-plan instead of making them one turn at a time. " +
	"A step's input may use the result of an earlier step: ${<id>.output} is that step's output, ${<id>.data.<key>} one key of its data. " +
	"With on_error: stop (the default) the steps after a failed one are skipped; with on_error: continue they still run. " +
	"Make the calls one turn at a time instead when you need to look at a result before deciding what to do next."

// WithGuidance is a system prompt's instructions followed by Guidance when submit-plan is staged: the
// guidance is there exactly when the tool is.
func WithGuidance(instructions string, staged bool) string {
	if !staged {
		return instructions
	}
	return strings.TrimLeft(strings.TrimRight(instructions, "\n")+"\n\n"+Guidance, "\n")
}

// NotCallable lists the tools that are not callable from a plan step (SPEC: switch-driver,
// pull-artifact, remove-artifact and end-without-answer; and submit-plan itself).
func NotCallable() []string {
	return []string{"submit-plan", "switch-driver", "pull-artifact", "remove-artifact", "end-without-answer"}
}

// Step is one step of a plan.
type Step struct {
	ID    string          `json:"id"`
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Plan is submit-plan's input.
type Plan struct {
	Steps   []Step `json:"steps"`
	OnError string `json:"on_error,omitempty"`
}

// refusal prefixes every refusal: nothing ran.
const refusal = "'submit-plan' refused the plan before any step ran: "

var idRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// refRE is a reference: ${<id>.output} or ${<id>.data.<key>}.
var refRE = regexp.MustCompile(`\$\{([a-z0-9_-]+)\.(output|data\.([^}]+))\}`)

// Parse reads submit-plan's input and checks its shape: 1 to 32 steps with unique ids of
// [a-z0-9_-]+, each naming a tool, and on_error stop or continue (default stop).
func Parse(input json.RawMessage) (Plan, error) {
	var p Plan
	if err := json.Unmarshal(input, &p); err != nil || p.Steps == nil {
		return Plan{}, fmt.Errorf(`%sit needs {"steps": [{"id": "s1", "tool": "<name>", "input": {…}}, …], with 1 to %d steps, and may set "on_error": "stop" or "continue".`, refusal, MaxSteps)
	}
	switch p.OnError {
	case "":
		p.OnError = OnErrorStop
	case OnErrorStop, OnErrorContinue:
	default:
		return Plan{}, fmt.Errorf("%son_error is %q; it takes stop (the default) or continue.", refusal, p.OnError)
	}
	if n := len(p.Steps); n == 0 || n > MaxSteps {
		return Plan{}, fmt.Errorf("%sa plan has 1 to %d steps; this one has %d.", refusal, MaxSteps, n)
	}
	seen := map[string]bool{}
	for i, st := range p.Steps {
		switch {
		case !idRE.MatchString(st.ID):
			return Plan{}, fmt.Errorf("%sstep %d: id %q must be lowercase letters, digits, - and _, such as s%d.", refusal, i+1, st.ID, i+1)
		case seen[st.ID]:
			return Plan{}, fmt.Errorf("%sstep %s: an earlier step has the same id; give each step its own.", refusal, st.ID)
		case strings.TrimSpace(st.Tool) == "":
			return Plan{}, fmt.Errorf("%sstep %s: names no tool.", refusal, st.ID)
		}
		seen[st.ID] = true
		if len(st.Input) == 0 || string(st.Input) == "null" {
			p.Steps[i].Input = json.RawMessage("{}")
		}
	}
	return p, nil
}

// Check refuses, naming the step, a step whose tool is not callable from a plan, a tool known does not
// hold, and a reference to a step that is not an earlier one.
func Check(p Plan, known func(string) bool, inventory []string) error {
	earlier := map[string]bool{}
	for _, st := range p.Steps {
		if slices.Contains(NotCallable(), st.Tool) {
			return fmt.Errorf("%sstep %s: %s is not callable from a plan step; call it on its own, outside a plan.", refusal, st.ID, st.Tool)
		}
		if !known(st.Tool) {
			s := slices.Clone(inventory)
			slices.Sort(s)
			return fmt.Errorf("%sstep %s: no tool named %q in this session. Tools you can call: %s.", refusal, st.ID, st.Tool, strings.Join(s, ", "))
		}
		for _, m := range refRE.FindAllStringSubmatch(string(st.Input), -1) {
			if !earlier[m[1]] {
				return fmt.Errorf("%sstep %s: %s refers to %s, which is not an earlier step of this plan; a step can use only the results of the steps before it.", refusal, st.ID, m[0], m[1])
			}
		}
		earlier[st.ID] = true
	}
	return nil
}

// StepResult is how one step ended.
type StepResult struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Status string `json:"status"` // ok, error, skipped
	Output string `json:"output"`
	Data   any    `json:"data"`
}

// Dispatch runs one step's call through the session's own dispatch and returns the tool's status
// (runtimetools.StatusOK, StatusError or StatusRefused), its output and its data.
type Dispatch func(ctx context.Context, step, tool string, input json.RawMessage) (status, output string, data any)

// Config is what one plan run is given by the session.
type Config struct {
	Known     func(string) bool // whether the session can call a tool of that name
	Inventory func() []string   // the names it can call, for the refusal of an unknown one
	Dispatch  Dispatch
	// Record writes the plan's record.
	Record func(fields map[string]any)
}

// Run parses, checks and runs one plan, and renders its result: passed when every step ran ok, else
// failed; a refusal runs nothing and records nothing.
func Run(ctx context.Context, cfg Config, input json.RawMessage) runtimetools.Result {
	p, err := Parse(input)
	if err == nil {
		err = Check(p, cfg.Known, cfg.Inventory())
	}
	if err != nil {
		return runtimetools.Refused(err.Error())
	}
	ctx, span := nest.Start(ctx, conv.SpanPlan, trace.SpanKindInternal, conv.PlanSteps.Int(len(p.Steps)), conv.PlanOnError.String(p.OnError))
	defer span.End()
	results := make([]StepResult, 0, len(p.Steps))
	byID := map[string]StepResult{}
	failed := false
	for _, st := range p.Steps {
		r := StepResult{ID: st.ID, Tool: st.Tool}
		switch {
		case failed && p.OnError == OnErrorStop:
			r.Status = StepSkipped
		case ctx.Err() != nil:
			r.Status, r.Output = StepSkipped, "the task ended before this step ran"
		default:
			in, err := resolve(st.Input, byID)
			if err != nil {
				r.Status, r.Output = StepError, err.Error()
				break
			}
			status, out, data := cfg.Dispatch(ctx, st.ID, st.Tool, in)
			r.Output, r.Data = out, data
			r.Status = StepOK
			if status != runtimetools.StatusOK {
				r.Status = StepError
			}
		}
		if r.Status == StepError {
			failed = true
		}
		byID[st.ID] = r
		results = append(results, r)
	}
	counts := map[string]int{}
	steps := make([]map[string]any, len(results))
	for i, r := range results {
		counts[r.Status]++
		steps[i] = map[string]any{"id": r.ID, "tool": r.Tool, "status": r.Status}
	}
	res := runtimetools.Result{Status: runtimetools.StatusOK, Data: map[string]any{"steps": results},
		Summary: fmt.Sprintf("Plan of %d step(s): %d ok, %d error, %d skipped", len(results), counts[StepOK], counts[StepError], counts[StepSkipped])}
	if failed {
		res.Status = runtimetools.StatusError
		span.SetStatus(codes.Error, res.Summary)
	}
	span.SetAttributes(conv.PlanStepsOK.Int(counts[StepOK]), conv.PlanStepsError.Int(counts[StepError]), conv.PlanStepsSkipped.Int(counts[StepSkipped]))
	res.Output = render(results)
	if cfg.Record != nil {
		cfg.Record(map[string]any{"steps": steps, "on_error": p.OnError, "status": res.Status})
	}
	return res
}

// resolve replaces every reference in a step's input with the value it names. A reference to a key
// the earlier step's data does not have is an error of this step, which then does not run.
func resolve(input json.RawMessage, done map[string]StepResult) (json.RawMessage, error) {
	if !refRE.Match(input) {
		return input, nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil, fmt.Errorf("the step's input is not JSON: %v", err)
	}
	var rerr error
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case string:
			return refRE.ReplaceAllStringFunc(t, func(ref string) string {
				m := refRE.FindStringSubmatch(ref)
				r := done[m[1]]
				if m[2] == "output" {
					return r.Output
				}
				val, ok := lookup(r.Data, m[3])
				if !ok {
					if rerr == nil {
						rerr = fmt.Errorf("%s: step %s's data has no key %q, so this step did not run", ref, m[1], m[3])
					}
					return ref
				}
				if s, ok := val.(string); ok {
					return s
				}
				b, _ := json.Marshal(val)
				return string(b)
			})
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		case map[string]any:
			for k := range t {
				t[k] = walk(t[k])
			}
		}
		return x
	}
	v = walk(v)
	if rerr != nil {
		return nil, rerr
	}
	return json.RawMessage(enc(v)), nil
}

// lookup finds a dotted key in a step's data.
func lookup(data any, key string) (any, bool) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, false
	}
	var cur any
	if json.Unmarshal(b, &cur) != nil {
		return nil, false
	}
	for _, k := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// enc is v as JSON without HTML escaping, so an output reads as the tool wrote it; null when v has no
// JSON form.
func enc(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cutNote closes a result cut at ResultMax.
const cutNote = "\n[plan result cut at 64 KiB: the outputs of the later steps are shortened or missing]"

// render writes {"steps": [...]} with each step's keys in order, cut at ResultMax on a rune boundary.
func render(results []StepResult) string {
	var b strings.Builder
	b.WriteString(`{"steps":[`)
	for i, r := range results {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%s,"tool":%s,"status":%s,"output":%s,"data":%s}`, enc(r.ID), enc(r.Tool), enc(r.Status), enc(r.Output), enc(r.Data))
	}
	b.WriteString("]}")
	s := b.String()
	if len(s) <= ResultMax {
		return s
	}
	cut := ResultMax - len(cutNote)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + cutNote
}
