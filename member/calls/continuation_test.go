package calls

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// specWorker and specCritic are the two calls of SPEC's example under "How the answer arrives".
var (
	specWorker = CallOutcome{CallID: "mcl_01a1…", Member: "worker", Status: "completed", Output: "WORKER-0123"}
	specCritic = CallOutcome{CallID: "mcl_01a2…", Member: "critic", Status: "timed_out", Output: "critic did not answer within 600s. …"}
)

// TestContinuationMessage checks the whole message against SPEC, each expected message written out.
func TestContinuationMessage(t *testing.T) {
	tests := []struct {
		name   string
		round  []CallOutcome
		latest []CallOutcome
		caller string
		want   string
	}{
		{
			name:   "SPEC's example, entry member's task",
			round:  []CallOutcome{specWorker, specCritic},
			latest: []CallOutcome{specWorker, specCritic},
			want: `[call-member] call mcl_01a1… to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] call mcl_01a2… to critic ended timed_out, with no answer from critic:
<untrusted-content source=member:critic>
critic did not answer within 600s. …
</untrusted-content>

[call-member] No answer came from: critic (call mcl_01a2…, timed_out). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
		{
			name:   "SPEC's example, task another formation member sent",
			round:  []CallOutcome{specWorker, specCritic},
			latest: []CallOutcome{specWorker, specCritic},
			caller: "lead",
			want: `[call-member] call mcl_01a1… to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] call mcl_01a2… to critic ended timed_out, with no answer from critic:
<untrusted-content source=member:critic>
critic did not answer within 600s. …
</untrusted-content>

[call-member] No answer came from: critic (call mcl_01a2…, timed_out). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed. If you have no answer to give, call end-without-answer with the reason instead: the runtime then tells lead plainly that you gave none.`,
		},
		{
			name: "all completed",
			round: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Output: "WORKER-0123"},
				{CallID: "mcl_2", Member: "critic", Status: "completed", Output: "looks right\n"},
			},
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed"},
				{CallID: "mcl_2", Member: "critic", Status: "completed"},
			},
			want: `[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] call mcl_2 to critic ended completed:
<untrusted-content source=member:critic>
looks right
</untrusted-content>

[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work.`,
		},
		{
			name:   "all completed, task another formation member sent: the None line never names the tool",
			round:  []CallOutcome{{CallID: "mcl_1", Member: "worker", Status: "completed", Output: "WORKER-0123"}},
			latest: []CallOutcome{{CallID: "mcl_1", Member: "worker", Status: "completed"}},
			caller: "lead",
			want: `[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work.`,
		},
		{
			name: "every status other than completed",
			round: []CallOutcome{
				{CallID: "mcl_1", Member: "a", Status: "no_answer", Output: "a ended its task without an answer"},
				{CallID: "mcl_2", Member: "b", Status: "failed", Output: "b's door answered 500"},
				{CallID: "mcl_3", Member: "c", Status: "canceled", Output: "task canceled"},
				{CallID: "mcl_4", Member: "d", Status: "rejected", Output: "d did not take the task: session closing"},
				{CallID: "mcl_5", Member: "e", Status: "timed_out", Output: "e did not answer within 600s; it was not cancelled and may still be working"},
				{CallID: "mcl_6", Member: "f", Status: "unreachable", Output: "f's door stopped answering"},
				{CallID: "mcl_7", Member: "g", Status: "abandoned", Output: "the calling task ended before g took the task; g was busy and was never handed it"},
			},
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "a", Status: "no_answer"},
				{CallID: "mcl_2", Member: "b", Status: "failed"},
				{CallID: "mcl_3", Member: "c", Status: "canceled"},
				{CallID: "mcl_4", Member: "d", Status: "rejected"},
				{CallID: "mcl_5", Member: "e", Status: "timed_out"},
				{CallID: "mcl_6", Member: "f", Status: "unreachable"},
				{CallID: "mcl_7", Member: "g", Status: "abandoned"},
			},
			want: `[call-member] call mcl_1 to a ended no_answer, with no answer from a:
<untrusted-content source=member:a>
a ended its task without an answer
</untrusted-content>

[call-member] call mcl_2 to b ended failed, with no answer from b:
<untrusted-content source=member:b>
b's door answered 500
</untrusted-content>

[call-member] call mcl_3 to c ended canceled, with no answer from c:
<untrusted-content source=member:c>
task canceled
</untrusted-content>

[call-member] call mcl_4 to d ended rejected, with no answer from d:
<untrusted-content source=member:d>
d did not take the task: session closing
</untrusted-content>

[call-member] call mcl_5 to e ended timed_out, with no answer from e:
<untrusted-content source=member:e>
e did not answer within 600s; it was not cancelled and may still be working
</untrusted-content>

[call-member] call mcl_6 to f ended unreachable, with no answer from f:
<untrusted-content source=member:f>
f's door stopped answering
</untrusted-content>

[call-member] call mcl_7 to g ended abandoned, with no answer from g:
<untrusted-content source=member:g>
the calling task ended before g took the task; g was busy and was never handed it
</untrusted-content>

[call-member] No answer came from: a (call mcl_1, no_answer), b (call mcl_2, failed), c (call mcl_3, canceled), d (call mcl_4, rejected), e (call mcl_5, timed_out), f (call mcl_6, unreachable), g (call mcl_7, abandoned). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
		{
			name: "further-down form and gap line",
			round: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Output: "half of it",
					Below: []NoAnswer{{"critic", "timed_out"}, {"tester", "no_answer"}}},
				{CallID: "mcl_2", Member: "planner", Status: "no_answer", Output: "scout gave me nothing",
					Below: []NoAnswer{{"scout", "unreachable"}, {"mapper", "failed"}}},
			},
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed",
					Below: []NoAnswer{{"critic", "timed_out"}, {"tester", "no_answer"}}},
				{CallID: "mcl_2", Member: "planner", Status: "no_answer",
					Below: []NoAnswer{{"scout", "unreachable"}, {"mapper", "failed"}}},
			},
			caller: "lead",
			want: `[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
half of it
</untrusted-content>

[call-member] call mcl_2 to planner ended no_answer, with no answer from planner:
<untrusted-content source=member:planner>
scout gave me nothing
</untrusted-content>

[call-member] No answer came from: planner (call mcl_2, no_answer; further down, no answer came from scout (unreachable), mapper (failed)). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] worker (call mcl_1) answered without an answer from critic (timed_out), tester (no_answer): any part of its answer that stands in for theirs is worker's own, not theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed. If you have no answer to give, call end-without-answer with the reason instead: the runtime then tells lead plainly that you gave none.`,
		},
		{
			name: "gap line alone, and a Below on a failed call is not read",
			round: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Output: "WORKER-0123",
					Below: []NoAnswer{{"critic", "timed_out"}}},
				{CallID: "mcl_2", Member: "scout", Status: "failed", Output: "scout's door answered 500",
					Below: []NoAnswer{{"mapper", "failed"}}},
			},
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Below: []NoAnswer{{"critic", "timed_out"}}},
				{CallID: "mcl_2", Member: "scout", Status: "failed", Below: []NoAnswer{{"mapper", "failed"}}},
			},
			want: `[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] call mcl_2 to scout ended failed, with no answer from scout:
<untrusted-content source=member:scout>
scout's door answered 500
</untrusted-content>

[call-member] No answer came from: scout (call mcl_2, failed). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] worker (call mcl_1) answered without an answer from critic (timed_out): any part of its answer that stands in for theirs is worker's own, not theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
		{
			name:   "gap only: the One or more last line",
			round:  []CallOutcome{{CallID: "mcl_1", Member: "worker", Status: "completed", Output: "WORKER-0123", Below: []NoAnswer{{"critic", "canceled"}}}},
			latest: []CallOutcome{{CallID: "mcl_1", Member: "worker", Status: "completed", Below: []NoAnswer{{"critic", "canceled"}}}},
			want: `[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] worker (call mcl_1) answered without an answer from critic (canceled): any part of its answer that stands in for theirs is worker's own, not theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
		{
			// critic timed_out and worker answered with a gap in an earlier round; both were called again
			// and completed with nothing missing below, so latest holds only those newer calls.
			name: "a later completed call removes a member from both lines",
			round: []CallOutcome{
				{CallID: "mcl_3", Member: "worker", Status: "completed", Output: "all of it"},
				{CallID: "mcl_4", Member: "critic", Status: "completed", Output: "looks right"},
			},
			latest: []CallOutcome{
				{CallID: "mcl_3", Member: "worker", Status: "completed"},
				{CallID: "mcl_4", Member: "critic", Status: "completed"},
			},
			caller: "lead",
			want: `[call-member] call mcl_3 to worker ended completed:
<untrusted-content source=member:worker>
all of it
</untrusted-content>

[call-member] call mcl_4 to critic ended completed:
<untrusted-content source=member:critic>
looks right
</untrusted-content>

[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work.`,
		},
		{
			// The scout call ended failed in its own tool call, in an earlier turn: it has no header here,
			// but scout is still a member with no answer.
			name:  "a call that ended in its own tool call is still named",
			round: []CallOutcome{{CallID: "mcl_2", Member: "worker", Status: "completed", Output: "WORKER-0123"}},
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "scout", Status: "failed"},
				{CallID: "mcl_2", Member: "worker", Status: "completed"},
			},
			want: `[call-member] call mcl_2 to worker ended completed:
<untrusted-content source=member:worker>
WORKER-0123
</untrusted-content>

[call-member] No answer came from: scout (call mcl_1, failed). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
		{
			// The answers come in the order the calls were made; the runtime's lines in the order the
			// members were first called (critic in an earlier round, then worker).
			name: "several calls in one round, in call order",
			round: []CallOutcome{
				{CallID: "mcl_5", Member: "worker", Status: "rejected", Output: "worker did not take the task"},
				{CallID: "mcl_6", Member: "tester", Status: "completed", Output: "tests pass"},
				{CallID: "mcl_7", Member: "critic", Status: "unreachable", Output: "critic's door stopped answering"},
			},
			latest: []CallOutcome{
				{CallID: "mcl_7", Member: "critic", Status: "unreachable"},
				{CallID: "mcl_5", Member: "worker", Status: "rejected"},
				{CallID: "mcl_6", Member: "tester", Status: "completed"},
			},
			want: `[call-member] call mcl_5 to worker ended rejected, with no answer from worker:
<untrusted-content source=member:worker>
worker did not take the task
</untrusted-content>

[call-member] call mcl_6 to tester ended completed:
<untrusted-content source=member:tester>
tests pass
</untrusted-content>

[call-member] call mcl_7 to critic ended unreachable, with no answer from critic:
<untrusted-content source=member:critic>
critic's door stopped answering
</untrusted-content>

[call-member] No answer came from: critic (call mcl_7, unreachable), worker (call mcl_5, rejected). What you asked of them has not been done by them: do not present an answer of your own as theirs.

[call-member] Every call this task made has ended. Answer the task with the answers you have and say plainly which part has no answer, or call a member again if another attempt could succeed.`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ContinuationMessage(tt.round, tt.latest, tt.caller)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ContinuationMessage mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContinuationMessageCutsOutput checks a 70 KiB answer: the message is written out in full but for
// the 64 KiB kept, which stands in as {{kept}}.
func TestContinuationMessageCutsOutput(t *testing.T) {
	kept := strings.Repeat("w", 64<<10)
	out := kept + strings.Repeat("x", 6<<10)
	c := CallOutcome{CallID: "mcl_1", Member: "worker", Status: "completed", Output: out}
	want := strings.Replace(`[call-member] call mcl_1 to worker ended completed:
<untrusted-content source=member:worker>
{{kept}}
[output cut at 64 KiB]
</untrusted-content>

[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work.`, "{{kept}}", kept, 1)
	got := ContinuationMessage([]CallOutcome{c}, []CallOutcome{c}, "")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ContinuationMessage mismatch (-want +got):\n%s", diff)
	}
}

// TestContinuationCutOutput checks the 64 KiB cut on its own: never within a UTF-8 character, and the
// note always on a line of its own.
func TestContinuationCutOutput(t *testing.T) {
	const limit = 64 << 10
	a := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "exactly 64 KiB is kept whole", in: a(limit), want: a(limit)},
		{name: "one byte over", in: a(limit + 1), want: a(limit) + "\n[output cut at 64 KiB]"},
		{name: "cut on a rune boundary", in: a(limit) + "é", want: a(limit) + "\n[output cut at 64 KiB]"},
		{name: "two-byte rune across the cut", in: a(limit-1) + "é", want: a(limit-1) + "\n[output cut at 64 KiB]"},
		{name: "four-byte rune across the cut", in: a(limit-3) + "😀", want: a(limit-3) + "\n[output cut at 64 KiB]"},
		{name: "four-byte rune across the cut, one byte in", in: a(limit-1) + "😀", want: a(limit-1) + "\n[output cut at 64 KiB]"},
		{name: "cut just after a newline", in: a(limit-1) + "\nmore", want: a(limit-1) + "\n[output cut at 64 KiB]"},
		{name: "not UTF-8: cut at 64 KiB", in: a(limit-4) + strings.Repeat("\x80", 8), want: a(limit-4) + "\x80\x80\x80\x80\n[output cut at 64 KiB]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cutOutput(tt.in); got != tt.want {
				t.Errorf("cutOutput: got %d bytes ending %q, want %d bytes ending %q",
					len(got), got[max(0, len(got)-30):], len(tt.want), tt.want[max(0, len(tt.want)-30):])
			}
		})
	}
}

func TestNoAnswerBelow(t *testing.T) {
	tests := []struct {
		name   string
		latest []CallOutcome
		want   []NoAnswer
	}{
		{name: "no calls", latest: nil, want: nil},
		{
			name: "all completed, nothing below",
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed"},
				{CallID: "mcl_2", Member: "critic", Status: "completed"},
			},
			want: nil,
		},
		{
			name:   "SPEC's example",
			latest: []CallOutcome{specWorker, specCritic},
			want:   []NoAnswer{{"critic", "timed_out"}},
		},
		{
			name: "own callees first, then what completed and no_answer calls reported below",
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Below: []NoAnswer{{"tester", "timed_out"}}},
				{CallID: "mcl_2", Member: "planner", Status: "no_answer", Below: []NoAnswer{{"scout", "unreachable"}, {"mapper", "failed"}}},
				{CallID: "mcl_3", Member: "critic", Status: "failed", Below: []NoAnswer{{"ignored", "failed"}}},
			},
			want: []NoAnswer{
				{"planner", "no_answer"},
				{"critic", "failed"},
				{"tester", "timed_out"},
				{"scout", "unreachable"},
				{"mapper", "failed"},
			},
		},
		{
			name: "each member once, with the status it is first named with",
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "worker", Status: "completed", Below: []NoAnswer{{"critic", "no_answer"}, {"scout", "timed_out"}}},
				{CallID: "mcl_2", Member: "critic", Status: "canceled"},
				{CallID: "mcl_3", Member: "planner", Status: "no_answer", Below: []NoAnswer{{"scout", "failed"}}},
			},
			want: []NoAnswer{
				{"critic", "canceled"},
				{"planner", "no_answer"},
				{"scout", "timed_out"},
			},
		},
		{
			name: "at most 8, own callees first",
			latest: []CallOutcome{
				{CallID: "mcl_1", Member: "m1", Status: "no_answer", Below: []NoAnswer{{"b1", "failed"}, {"b2", "failed"}, {"b3", "failed"}, {"b4", "failed"}}},
				{CallID: "mcl_2", Member: "m2", Status: "failed"},
				{CallID: "mcl_3", Member: "m3", Status: "failed"},
				{CallID: "mcl_4", Member: "m4", Status: "failed"},
				{CallID: "mcl_5", Member: "m5", Status: "failed"},
				{CallID: "mcl_6", Member: "m6", Status: "failed"},
			},
			want: []NoAnswer{
				{"m1", "no_answer"}, {"m2", "failed"}, {"m3", "failed"}, {"m4", "failed"}, {"m5", "failed"}, {"m6", "failed"},
				{"b1", "failed"}, {"b2", "failed"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NoAnswerBelow(tt.latest)); diff != "" {
				t.Errorf("NoAnswerBelow mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
