package member

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/calls/callstest"
)

// formationOf is a roster in which the test session's member, m, may call worker; both run the
// session's capsule directory.
const formationOf = "formation: f\nmembers:\n  - {name: m, capsule: ./capsule}\n  - {name: worker, capsule: ./capsule}\nreach:\n  - {from: m, to: [worker]}\n"

// SPEC, The deadline notice: "A tool that ran and reported failure carries it; a refused call, or one the
// runtime could not run, does not." Every kind of refusal comes first in the turn; the notice rides the
// first call after them that ran, whether it succeeded or failed.
func TestDeadlineNoticeSkipsRefusals(t *testing.T) {
	refusals := "      - call:\n" +
		"          - {tool: no-such-tool}\n" +
		"          - {tool: switch-driver, input: {driver: nope}}\n" +
		"          - {tool: call-member, input: {member: nobody, task: x}}\n" +
		"          - {tool: call-member, input: {member: worker, task: '  '}}\n" +
		"          - {tool: end-without-answer, input: {reason: none}}\n" +
		"          - {tool: share-file, input: {path: x}}\n" +
		"          - {tool: background-command, input: {operation: status, work_id: nope}}\n"
	for name, ran := range map[string]string{
		"a call that succeeded": "      - call: [{tool: session-status}]\n",
		// worker's door does not answer: call-member ran and reported failure.
		"a call that ran and failed": "      - call: [{tool: call-member, input: {member: worker, task: 'are you there?'}}]\n",
	} {
		t.Run(name, func(t *testing.T) {
			clk := &clock{now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)}
			s, _ := startSession(t, map[string]string{
				"murmur.yaml": "name: agent\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" +
					"deadline: 1h\nlifecycle: {deadline_notice_secs: 300, shell_grace_secs: 5}\ncontrol: {agent_settings: [inference.driver]}\n" +
					"exports: {peer_files: out}\ncapabilities:\n  shell: {allow: [true]}\n  network: {allow: [localhost]}\n",
				"script.yaml": "rules:\n  - match: ''\n    turns:\n" + refusals + ran + "      - say: '{{.transcript}}'\n",
			}, sessionOpts{clock: clk, roster: formationOf, peers: &callstest.Peers{
				OnOffer: func(int) (*a2a.Task, error) { return nil, errors.New("connection refused") },
			}})
			clk.advance(56*time.Minute + 30*time.Second) // 210 s left: inside the margin
			transcript := answer(s.run(t, "go", Origin{}))
			line := "Session deadline: the runtime ends this session at 2026-10-20T13:00:00Z, in 210 seconds."
			if n := strings.Count(transcript, line); n != 1 {
				t.Fatalf("the notice appears %d times, want once:\n%s", n, transcript)
			}
			before, _, _ := strings.Cut(transcript, line)
			for _, refusal := range []string{"no tool named", "switch-driver refused", `cannot call "nobody"`, "needs a task",
				"ends only a task another formation member sent", "mints handles only for a member of a formation", "is not a work id"} {
				if !strings.Contains(before, refusal) {
					t.Errorf("refusal %q is not before the notice", refusal)
				}
			}
			// The notice is on the lines after the fence of the call that ran, the last tool result.
			last := before[strings.LastIndex(before, "<untrusted-content source=tool:"):]
			want := map[string]string{"a call that succeeded": "tool:session-status", "a call that ran and failed": "tool:call-member"}[name]
			if !strings.HasPrefix(last, "<untrusted-content source="+want+">") || strings.Contains(last, "assistant:") {
				t.Errorf("the notice rides\n%s\nwant the result of %s", last, want)
			}
		})
	}
}
