package calls

import (
	"strings"
	"unicode/utf8"

	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// CallOutcome is how one member call ended, as the continuation message reports it.
type CallOutcome struct {
	CallID string // mcl_…
	Member string
	Status runtimetools.CallStatus // completed, no_answer, failed, canceled, rejected, timed_out, unreachable, abandoned
	Output string                  // the text SPEC's Ending/Output table gives for the status (the caller picks it)
	// Below is the member's metadata.murmur.noAnswerBelow, read only for a completed or no_answer call,
	// already filtered by the caller (at most 8, roster members only, status other than completed).
	Below []NoAnswer
}

// NoAnswer names a member that gave no answer, with how its call ended.
type NoAnswer struct {
	Member string
	Status runtimetools.CallStatus
}

// The two endings the continuation treats apart from the rest: only these carry a member's own report
// of the members further down that gave it no answer.
const (
	outcomeCompleted = runtimetools.CallStatusCompleted
	outcomeNoAnswer  = runtimetools.CallStatusNoAnswer
)

// continuationOutputMax is SPEC's 64 KiB cut on each member's output. A cut output keeps at most this
// many bytes, ending on a UTF-8 boundary, and gets continuationCutNote as a last line inside its fence:
// the note sits inside because it qualifies the fenced text, and the message's layout outside the fences
// stays exactly SPEC's.
const (
	continuationOutputMax = 64 << 10
	continuationCutNote   = "[output cut at 64 KiB]"
	noAnswerBelowMax      = 8
)

// ContinuationMessage renders the message. round holds the calls whose answers this continuation
// delivers, in the order they were made. latest holds, for every member this task has called, its latest
// call (whether it ended in its own tool call or in a continuation), in the order the members were first
// called; the no-answer and gap lines are computed from it. caller is the formation member that sent the
// task ("" for the entry member's task, which has no formation caller).
//
// The message is one block per answer (header line, then the output fenced under member:<name>), then
// the runtime's lines, each block and each line separated by one blank line, as SPEC's example is laid
// out, with no trailing newline. A Below on a call that ended neither completed nor no_answer is ignored,
// since SPEC reads it only for those two.
func ContinuationMessage(round, latest []CallOutcome, caller string) string {
	var blocks []string
	for _, c := range round {
		blocks = append(blocks, continuationHeader(c)+"\n"+driver.Fence("member:"+c.Member, cutOutput(c.Output), ""))
	}

	var missing, gaps []string
	for _, c := range latest {
		below := reportedBelow(c)
		switch {
		case c.Status != outcomeCompleted:
			s := c.Member + " (call " + c.CallID + ", " + string(c.Status)
			if len(below) > 0 {
				s += "; further down, no answer came from " + joinNoAnswers(below)
			}
			missing = append(missing, s+")")
		case len(below) > 0:
			gaps = append(gaps, "[call-member] "+c.Member+" (call "+c.CallID+") answered without an answer from "+
				joinNoAnswers(below)+": any part of its answer that stands in for theirs is "+c.Member+"'s own, not theirs.")
		}
	}
	if len(missing) > 0 {
		blocks = append(blocks, "[call-member] No answer came from: "+strings.Join(missing, ", ")+
			". What you asked of them has not been done by them: do not present an answer of your own as theirs.")
	}
	blocks = append(blocks, gaps...)

	if len(missing) == 0 && len(gaps) == 0 {
		blocks = append(blocks, "[call-member] Every call this task made has ended, and the answers are above. "+
			"Answer the task with them now; call a member again only to give it new work.")
	} else {
		last := "[call-member] Every call this task made has ended. Answer the task with the answers you have and " +
			"say plainly which part has no answer, or call a member again if another attempt could succeed."
		if caller != "" {
			// Only a task another formation member sent can end without an answer; the entry member's
			// lines never name the tool.
			last += " If you have no answer to give, call end-without-answer with the reason instead: the runtime then tells " +
				caller + " plainly that you gave none."
		}
		blocks = append(blocks, last)
	}
	return strings.Join(blocks, "\n\n")
}

// NoAnswerBelow returns what a task ending without an answer reports in metadata.murmur.noAnswerBelow:
// first every member of latest whose latest call did not end completed, with that call's status, in
// latest's order; then, in latest's order, the members each completed or no_answer call reported in its
// Below, in the order reported. A member is named once, with the status it is first named with, so a
// member this task called itself keeps its own call's status. The list stops at 8 names. It is nil when
// every call completed with nothing missing below it.
func NoAnswerBelow(latest []CallOutcome) []NoAnswer {
	var out []NoAnswer
	seen := make(map[string]bool)
	add := func(n NoAnswer) {
		if len(out) < noAnswerBelowMax && !seen[n.Member] {
			seen[n.Member] = true
			out = append(out, n)
		}
	}
	for _, c := range latest {
		if c.Status != outcomeCompleted {
			add(NoAnswer{Member: c.Member, Status: c.Status})
		}
	}
	for _, c := range latest {
		for _, n := range reportedBelow(c) {
			add(n)
		}
	}
	return out
}

// NoAnswerBelowMeta is names as metadata.murmur.noAnswerBelow holds them: [{member, status}, …].
func NoAnswerBelowMeta(names []NoAnswer) []map[string]any {
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"member": n.Member, "status": string(n.Status)})
	}
	return out
}

// reportedBelow is c's Below when SPEC reads it, for a completed or no_answer call, and nil otherwise.
func reportedBelow(c CallOutcome) []NoAnswer {
	if c.Status != outcomeCompleted && c.Status != outcomeNoAnswer {
		return nil
	}
	return c.Below
}

// continuationHeader is SPEC's Ending/Header line for c.
func continuationHeader(c CallOutcome) string {
	h := "[call-member] call " + c.CallID + " to " + c.Member + " ended " + string(c.Status)
	if c.Status == outcomeCompleted {
		return h + ":"
	}
	return h + ", with no answer from " + c.Member + ":"
}

// joinNoAnswers renders names as SPEC's "<name> (<status>), <name> (<status>)".
func joinNoAnswers(names []NoAnswer) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n.Member + " (" + string(n.Status) + ")"
	}
	return strings.Join(parts, ", ")
}

// cutOutput applies SPEC's 64 KiB cut. The cut backs off at most three bytes to the start of a rune, so
// a multi-byte character is never split and bytes that are not UTF-8 cannot make it back off further.
func cutOutput(s string) string {
	if len(s) <= continuationOutputMax {
		return s
	}
	i := continuationOutputMax
	for i > continuationOutputMax-(utf8.UTFMax-1) && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = continuationOutputMax
	}
	kept := s[:i]
	if !strings.HasSuffix(kept, "\n") {
		kept += "\n"
	}
	return kept + continuationCutNote
}

// DelegationOutcome is how one delegate-task delegation ended, as the continuation message reports it.
type DelegationOutcome struct {
	ID      string                  // dlg_…
	Capsule string                  // the bare name of its spawn.allow entry
	Status  runtimetools.CallStatus // completed, failed, canceled, timed_out, abandoned
	Output  string                  // the sub-session's answer, or why there is none
}

// Continuation renders the one message a continuation adds when member answers, delegation outcomes or
// both arrived (SPEC "How the answer arrives": answers first). With no member call in latest it is the
// delegation blocks and their closing lines alone; with no delegation in delegations it is exactly
// ContinuationMessage.
//
// Each outcome is the header line [delegate-task] delegation <id> to <capsule> ended <status>: with the
// sub-session's output fenced under capsule:<name>. After every fence, a delegation that did not
// complete is named in one no-outcome line; the delegation lines come before the call-member lines, so
// SPEC's last line of a message with member answers stays last.
func Continuation(round, latest []CallOutcome, delegations []DelegationOutcome, caller string) string {
	if len(delegations) == 0 {
		return ContinuationMessage(round, latest, caller)
	}
	var blocks []string
	for _, c := range round {
		blocks = append(blocks, continuationHeader(c)+"\n"+driver.Fence("member:"+c.Member, cutOutput(c.Output), ""))
	}
	var missing []string
	for _, d := range delegations {
		blocks = append(blocks, "[delegate-task] delegation "+d.ID+" to "+d.Capsule+" ended "+string(d.Status)+":\n"+
			driver.Fence("capsule:"+d.Capsule, cutOutput(d.Output), ""))
		if d.Status != outcomeCompleted {
			missing = append(missing, d.Capsule+" (delegation "+d.ID+", "+string(d.Status)+")")
		}
	}
	if len(missing) > 0 {
		blocks = append(blocks, "[delegate-task] No outcome came from: "+strings.Join(missing, ", ")+
			". What you delegated to them has not been done by them: do not present an answer of your own as theirs.")
	}
	if len(latest) == 0 {
		if len(missing) == 0 {
			blocks = append(blocks, "[delegate-task] Every delegation this task made has ended, and the outcomes are above. "+
				"Answer the task with them now; delegate again only to give a sub-capsule new work.")
		} else {
			blocks = append(blocks, "[delegate-task] Every delegation this task made has ended. Answer the task with the outcomes you have and "+
				"say plainly which part has no answer, or delegate again if another attempt could succeed.")
		}
		return strings.Join(blocks, "\n\n")
	}
	// The call-member lines: ContinuationMessage with no answer blocks is exactly those lines.
	return strings.Join(blocks, "\n\n") + "\n\n" + ContinuationMessage(nil, latest, caller)
}

// AnswersData is the script driver's .answers: the member answers and then the delegation outcomes of
// the latest continuation (a delegation's member is its capsule, its call_id the delegation id).
func AnswersData(round []CallOutcome, delegations []DelegationOutcome) []map[string]any {
	out := make([]map[string]any, 0, len(round)+len(delegations))
	for _, o := range round {
		out = append(out, map[string]any{"member": o.Member, "call_id": o.CallID, "status": string(o.Status), "output": o.Output})
	}
	for _, o := range delegations {
		out = append(out, map[string]any{"member": o.Capsule, "call_id": o.ID, "status": string(o.Status), "output": o.Output})
	}
	return out
}
