package calls

import (
	"context"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/member/records"
)

// Delegations is what a task's continuation needs of its delegations (delegate.Tracker).
type Delegations interface {
	Pending() (out, undelivered int, changed chan struct{})
	Round() []DelegationOutcome
}

// Outstanding reports whether a call of tc or a delegation of dt is still out, or ended and not yet
// delivered: the task then waits for all of them and continues once (SPEC "How the answer arrives").
func Outstanding(tc *Tracker, dt Delegations) bool {
	out, undelivered, _ := tc.Pending()
	dout, dundelivered, _ := dt.Pending()
	return out+undelivered+dout+dundelivered > 0
}

// Resume waits until every call of tc and every delegation of dt has ended, telling status the counts
// while any is out; then it takes the round, tells status and the records (task_continued) that the
// task continues, and returns the continuation message and the script driver's answers (AnswersData).
func Resume(ctx context.Context, tc *Tracker, dt Delegations, status func(text string)) (string, []map[string]any, error) {
	shown := ""
	for {
		out, _, changed := tc.Pending()
		dout, _, dchanged := dt.Pending()
		if out+dout == 0 {
			break
		}
		var parts []string
		if out > 0 {
			parts = append(parts, fmt.Sprintf("waiting on call-member: %d call(s) outstanding", out))
		}
		if dout > 0 {
			parts = append(parts, fmt.Sprintf("waiting on delegate-task: %d delegation(s) outstanding", dout))
		}
		if text := strings.Join(parts, "; "); text != shown {
			status(text)
			shown = text
		}
		select {
		case <-changed:
		case <-dchanged:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
	round, latest := tc.Round()
	outcomes := dt.Round()
	text := fmt.Sprintf("continuing with %d member answer(s)", len(round))
	rec := map[string]any{"answers": len(round)}
	if len(outcomes) > 0 {
		text += fmt.Sprintf(" and %d delegation outcome(s)", len(outcomes))
		rec["delegations"] = len(outcomes)
	}
	status(text)
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = tc.cfg.Record(records.TypeTaskContinued, tc.task, rec)
	return Continuation(round, latest, outcomes, tc.Caller()), AnswersData(round, outcomes), nil
}
