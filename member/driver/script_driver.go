package driver

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// ScriptDriver is the script driver: a deterministic model playing a Script. It keeps no state between
// calls: the rule is chosen from the task text and the turn from the number of assistant messages, so
// one driver serves any number of tasks at once.
type ScriptDriver struct {
	name   string
	script *Script
}

var _ Driver = (*ScriptDriver)(nil)

// NewScript returns a driver named name (the driver choice it serves) that plays s.
func NewScript(name string, s *Script) *ScriptDriver {
	return &ScriptDriver{name: name, script: s}
}

// Name returns the driver choice's name.
func (d *ScriptDriver) Name() string { return d.name }

// Infer plays the next turn of the first rule whose match matches req.Task.
func (d *ScriptDriver) Infer(ctx context.Context, req InferRequest) (InferResponse, error) {
	if err := ctx.Err(); err != nil {
		return InferResponse{}, err
	}
	s := d.script
	rule, groups := s.match(req.Task)
	if rule == nil {
		return InferResponse{}, fmt.Errorf("script: no rule in %s matches the task; add a catch-all rule with match: '' at the end of rules", s.Path)
	}
	played := playedTurns(req)
	turnNo := played + 1
	data := scriptData(req, rule, groups, turnNo)
	turn := rule.turn(played)
	if turn == nil {
		return InferResponse{}, fmt.Errorf("script: rule at %s:%d ran out of turns with nothing to say", s.Path, rule.Line)
	}
	fail := func(line int, err error) error {
		return fmt.Errorf("script: rule at %s:%d, turn %d (line %d): %w", s.Path, rule.Line, played+1, line, err)
	}
	resp, outChars, err := turn.play(data, turnNo, fail)
	if err != nil {
		return InferResponse{}, err
	}
	// The script driver is its own provider: its deterministic count is what it reports.
	resp.Usage = Usage{Input: EstimateInput(req), Output: int64((outChars + 3) / 4), Reported: true}
	return resp, nil
}

// match returns the first rule whose match matches task, with the submatches; nil when none does.
func (s *Script) match(task string) (*ScriptRule, []string) {
	for i := range s.Rules {
		if m := s.Rules[i].re.FindStringSubmatch(task); m != nil {
			return &s.Rules[i], m
		}
	}
	return nil, nil
}

// playedTurns is how many turns the task has played: its inference call count (req.Turn) less this
// one, so a conversation that was compacted does not replay its turns; without it, the assistant
// messages so far.
func playedTurns(req InferRequest) int {
	if req.Turn > 0 {
		return req.Turn - 1
	}
	played := 0
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			played++
		}
	}
	return played
}

// turn returns the turn to play after played ones: the next, or once they are played the last that
// neither calls nor asks, said again; nil when there is none.
func (r *ScriptRule) turn(played int) *ScriptTurn {
	if played < len(r.Turns) {
		return &r.Turns[played]
	}
	for i := len(r.Turns) - 1; i >= 0; i-- {
		if r.Turns[i].Calls == nil && r.Turns[i].ask == nil {
			return &r.Turns[i]
		}
	}
	return nil
}

// play renders the turn with the template data: its question, its data, its text or its tool calls
// (numbered for turn turnNo). It returns the response and the characters of its output; fail wraps an
// error with the line it comes from.
func (t *ScriptTurn) play(data map[string]any, turnNo int, fail func(line int, err error) error) (InferResponse, int, error) {
	var resp InferResponse
	outChars := 0
	switch {
	case t.ask != nil:
		text, err := execTemplate(t.ask, data)
		if err != nil {
			return InferResponse{}, 0, fail(t.Line, err)
		}
		resp.Ask = text
		outChars = utf8.RuneCountInString(text)
	case t.data != nil:
		v, err := t.data.render(data)
		if err != nil {
			return InferResponse{}, 0, fail(t.Line, err)
		}
		if resp.Data, err = scriptJSON(v); err != nil {
			return InferResponse{}, 0, fail(t.Line, fmt.Errorf("data does not encode as JSON: %v", err))
		}
		resp.Text = string(resp.Data)
		outChars = utf8.RuneCount(resp.Data)
	case t.Calls == nil:
		text, err := execTemplate(t.say, data)
		if err != nil {
			return InferResponse{}, 0, fail(t.Line, err)
		}
		resp.Text = text
		outChars = utf8.RuneCountInString(text)
	default:
		for i, c := range t.Calls {
			v, err := c.input.render(data)
			if err != nil {
				return InferResponse{}, 0, fail(c.Line, err)
			}
			in, err := scriptJSON(v)
			if err != nil {
				return InferResponse{}, 0, fail(c.Line, fmt.Errorf("input does not encode as JSON: %v", err))
			}
			resp.Calls = append(resp.Calls, ToolCall{ID: fmt.Sprintf("call_%d_%d", turnNo, i+1), Name: c.Tool, Input: in})
			outChars += utf8.RuneCountInString(c.Tool) + utf8.RuneCount(in)
		}
	}
	return resp, outChars, nil
}
