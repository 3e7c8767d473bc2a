package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/runtimetools"
)

// fake runs steps by echoing their input, or failing for the tool "fail".
func fake(ran *[]string) Config {
	return Config{
		Known:     func(string) bool { return true },
		Inventory: func() []string { return nil },
		Dispatch: func(_ context.Context, step, tool string, input json.RawMessage) (string, string, any) {
			*ran = append(*ran, step)
			if tool == "fail" {
				return runtimetools.StatusError, "it failed", nil
			}
			return runtimetools.StatusOK, string(input), map[string]any{"n": 7, "deep": map[string]any{"k": "v<>"}}
		},
	}
}

func TestMoreThan32StepsAreRefused(t *testing.T) {
	var steps []string
	for i := range 33 {
		steps = append(steps, fmt.Sprintf(`{"id":"s%d","tool":"x"}`, i))
	}
	var ran []string
	res := Run(context.Background(), fake(&ran), json.RawMessage(`{"steps":[`+strings.Join(steps, ",")+`]}`))
	if res.Status != runtimetools.StatusRefused || !strings.Contains(res.Output, "a plan has 1 to 32 steps; this one has 33.") || len(ran) != 0 {
		t.Errorf("33 steps: %+v, ran %v", res, ran)
	}
}

func TestReferencesResolveAndAMissingKeyFailsItsStep(t *testing.T) {
	var ran []string
	in := `{"on_error":"continue","steps":[
		{"id":"a","tool":"x","input":{"v":"1"}},
		{"id":"b","tool":"x","input":{"n":"${a.data.n}","k":["${a.data.deep.k}"]}},
		{"id":"c","tool":"x","input":{"v":"${a.data.missing}"}},
		{"id":"d","tool":"fail"},
		{"id":"e","tool":"x","input":{"v":"${d.output}"}}]}`
	res := Run(context.Background(), fake(&ran), json.RawMessage(in))
	if res.Status != runtimetools.StatusError {
		t.Errorf("status %s, want error", res.Status)
	}
	var out struct{ Steps []StepResult }
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.Steps[1].Output; got != `{"k":["v<>"],"n":"7"}` {
		t.Errorf("b's input %s", got)
	}
	if s := out.Steps[2]; s.Status != StepError || !strings.Contains(s.Output, `step a's data has no key "missing", so this step did not run`) {
		t.Errorf("c: %+v", s)
	}
	if got := out.Steps[4].Output; got != `{"v":"it failed"}` {
		t.Errorf("e's input %s", got)
	}
	if strings.Join(ran, ",") != "a,b,d,e" {
		t.Errorf("ran %v, want a,b,d,e (c never ran)", ran)
	}
	if !strings.Contains(res.Output, `v<>`) {
		t.Error("the result escapes HTML")
	}
}

func TestTheResultIsCutAt64KiB(t *testing.T) {
	cfg := Config{Known: func(string) bool { return true }, Inventory: func() []string { return nil },
		Dispatch: func(context.Context, string, string, json.RawMessage) (string, string, any) {
			return runtimetools.StatusOK, strings.Repeat("é", 20000), nil
		}}
	res := Run(context.Background(), cfg, json.RawMessage(`{"steps":[{"id":"a","tool":"x"},{"id":"b","tool":"x"}]}`))
	if len(res.Output) > ResultMax || !strings.HasSuffix(res.Output, cutNote) {
		t.Errorf("a %d-byte result, want at most %d ending with the cut note", len(res.Output), ResultMax)
	}
}
