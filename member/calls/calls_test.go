package calls

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls/callstest"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

func task(state a2a.TaskState, msg string) *a2a.Task {
	t := &a2a.Task{ID: "tsk_member", Status: a2a.TaskStatus{State: state}}
	if msg != "" {
		t.Status.Message = &a2a.Message{Parts: []a2a.Part{a2a.TextPart(msg)}}
	}
	return t
}

// busyTask is a busy member's refusal: SPEC's status text, and the mark its session sets.
func busyTask() (*a2a.Task, error) { return markedBusy(task(a2a.TaskStateRejected, busyMessage)), nil }

// markedBusy sets metadata.murmur.busy on t, as a member's session does on a task it has no room for.
func markedBusy(t *a2a.Task) *a2a.Task {
	t.Metadata = map[string]any{ids.Meta: ids.NewMeta(map[ids.MetaKey]any{ids.MetaBusy: true})}
	return t
}

// busyMessage is the session's status text of a task a busy member rejects.
const busyMessage = runtimetools.BusyRefusal

// testRecords keeps the records of a task's calls as trace.jsonl lines.
type testRecords struct {
	mu sync.Mutex
	b  strings.Builder
}

func (r *testRecords) Write(typ records.Type, task string, fields map[string]any) error {
	line, err := json.Marshal(map[string]any{"type": typ, "task": task, "fields": fields})
	r.mu.Lock()
	r.b.Write(line)
	r.b.WriteByte('\n')
	r.mu.Unlock()
	return err
}

func (r *testRecords) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// callSession is the least that member calls need: a lead that may call worker, running task
// tsk_caller for the operator.
func callSession(t *testing.T, peers Peers, delegationSecs int) (*testRecords, *Tracker, context.CancelFunc) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"lead", "worker"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte("name: "+n+"\n"), 0o644)
	}
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: lead, capsule: ./lead}\n  - {name: worker, capsule: ./worker}\nreach:\n  - {from: lead, to: [worker]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	recs := &testRecords{}
	ctx, cancel := context.WithCancel(context.Background())
	tc := Start(ctx, Config{Member: "lead", Roster: r, NetworkAllow: []string{"localhost"}, DeadlineSecs: delegationSecs,
		Peers: peers, Record: recs.Write}, "tsk_caller")
	return recs, tc, cancel
}

func onlyCall(tc *Tracker) *memberCall {
	tc.book.mu.Lock()
	defer tc.book.mu.Unlock()
	return tc.book.list[0]
}

func TestBusyMemberIsOfferedAgainWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := &callstest.Peers{
			OnOffer: func(n int) (*a2a.Task, error) {
				if n <= 6 {
					return busyTask()
				}
				return task(a2a.TaskStateSubmitted, ""), nil
			},
			OnGet: func(n int) (*a2a.Task, error) {
				done := task(a2a.TaskStateCompleted, "")
				done.Artifacts = []a2a.Artifact{{Name: "response", Parts: []a2a.Part{a2a.TextPart("the answer")}}}
				return done, nil
			},
		}
		recs, tc, cancel := callSession(t, peers, 600)
		defer cancel()
		st, err := tc.Call(context.Background(), "worker", "work")
		if err != nil || st.Status != "busy" || st.Output != "worker is busy with other work and did not take the task" || st.DeadlineSecs != 600 {
			t.Fatalf("first offer: %+v %v", st, err)
		}
		tc.wg.Wait()
		c := onlyCall(tc)
		if c.status != "completed" || c.output != "the answer" || c.offers != 7 {
			t.Errorf("call ended %s %q after %d offers, want completed after 7", c.status, c.output, c.offers)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		for i, w := range want {
			gap := peers.Offers()[i+1].Sub(peers.Offers()[i])
			if gap < w || gap >= w+reofferJitter {
				t.Errorf("wait before offer %d: %s, want %s plus under 250ms of jitter", i+2, gap, w)
			}
		}
		if peers.Gets() != 1 {
			t.Errorf("%d reads of the member's task, want 1", peers.Gets())
		}
		b := recs.text()
		if n := strings.Count(string(b), `"type":"member_call_busy"`); n != 6 {
			t.Errorf("%d member_call_busy records, want one per busy refusal (6)", n)
		}
		if n := strings.Count(string(b), `"type":"member_call_start"`); n != 1 {
			t.Errorf("%d member_call_start records, want 1", n)
		}
	})
}

func TestBusyUntilTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { return busyTask() }}
		_, tc, cancel := callSession(t, peers, 20)
		defer cancel()
		tc.Call(context.Background(), "worker", "work")
		tc.wg.Wait()
		c := onlyCall(tc)
		// Offers at 0, 1, 3, 7, 15 s (plus jitter); the next would come after the 20 s deadline.
		want := "worker stayed busy with other work for the whole 20s this call may wait and never took the task; it was offered the task 5 times. Nothing was done on it."
		if c.status != "rejected" || c.output != want {
			t.Errorf("call ended %s %q, want rejected %q", c.status, c.output, want)
		}
	})
}

// A member is busy when its refusal says exactly SPEC's busy message, with or without murmur's
// metadata.murmur.busy mark: an unmarked refusal in SPEC's words (another implementation's door) is
// offered again, and a marked refusal in other words ends the call rejected at once, on the first offer
// and on a later one alike (SPEC: "Only a refusal with exactly the message … is offered again").
func TestBusyIsSPECsMessage(t *testing.T) {
	taken := func() (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil }
	done := func(int) (*a2a.Task, error) {
		t := task(a2a.TaskStateCompleted, "")
		t.Artifacts = []a2a.Artifact{{Name: "response", Parts: []a2a.Part{a2a.TextPart("the answer")}}}
		return t, nil
	}
	for _, tc := range []struct {
		name    string
		offers  []func() (*a2a.Task, error) // the answers to the offers, in order
		start   runtimetools.CallStatus     // what the tool call returned
		status  runtimetools.CallStatus     // how the call ended
		output  string
		busyRec int // member_call_busy records
	}{
		{"marked, in other words", []func() (*a2a.Task, error){
			func() (*a2a.Task, error) { return markedBusy(task(a2a.TaskStateRejected, "no room at the inn")), nil },
		}, runtimetools.CallStatusRejected, runtimetools.CallStatusRejected, "worker did not take the task: no room at the inn", 0},
		{"SPEC's words, unmarked (another implementation's door)", []func() (*a2a.Task, error){
			func() (*a2a.Task, error) { return task(a2a.TaskStateRejected, busyMessage), nil },
			taken,
		}, runtimetools.CallStatusBusy, runtimetools.CallStatusCompleted, "the answer", 1},
		{"SPEC's words, marked, then other words on a later offer", []func() (*a2a.Task, error){
			busyTask,
			func() (*a2a.Task, error) { return markedBusy(task(a2a.TaskStateRejected, "shutting down")), nil },
		}, runtimetools.CallStatusBusy, runtimetools.CallStatusRejected, "worker did not take the task: shutting down", 1},
		{"marked but not rejected", []func() (*a2a.Task, error){
			func() (*a2a.Task, error) { return markedBusy(task(a2a.TaskStateSubmitted, busyMessage)), nil },
		}, runtimetools.CallStatusStarted, runtimetools.CallStatusCompleted, "the answer", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				peers := &callstest.Peers{OnOffer: func(n int) (*a2a.Task, error) {
					if n > len(tc.offers) {
						return nil, errors.New("offered again after the test's last answer")
					}
					return tc.offers[n-1]()
				}, OnGet: done}
				recs, calls, cancel := callSession(t, peers, 600)
				defer cancel()
				st, err := calls.Call(context.Background(), "worker", "work")
				if err != nil || st.Status != tc.start {
					t.Fatalf("the tool call returned %+v %v, want %s", st, err, tc.start)
				}
				calls.wg.Wait()
				c := onlyCall(calls)
				if c.status != tc.status || c.output != tc.output || c.offers != len(tc.offers) {
					t.Errorf("call ended %s %q after %d offers, want %s %q after %d", c.status, c.output, c.offers, tc.status, tc.output, len(tc.offers))
				}
				if n := strings.Count(recs.text(), `"type":"member_call_busy"`); n != tc.busyRec {
					t.Errorf("%d member_call_busy records, want %d", n, tc.busyRec)
				}
			})
		})
	}
}

func TestTwoSilentOffersEndUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := &callstest.Peers{OnOffer: func(n int) (*a2a.Task, error) {
			if n == 1 {
				return busyTask()
			}
			return nil, errors.New("connection refused")
		}}
		_, tc, cancel := callSession(t, peers, 600)
		defer cancel()
		tc.Call(context.Background(), "worker", "work")
		tc.wg.Wait()
		if c := onlyCall(tc); c.status != "unreachable" || c.offers != 3 {
			t.Errorf("call ended %s after %d offers, want unreachable after 3", c.status, c.offers)
		}
	})
}

func TestCallingTaskEndsBetweenOffers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { return busyTask() }}
		_, tc, cancel := callSession(t, peers, 600)
		tc.Call(context.Background(), "worker", "work")
		time.Sleep(500 * time.Millisecond)
		cancel()
		tc.wg.Wait()
		c := onlyCall(tc)
		if c.status != "abandoned" || c.output != "the calling task ended before worker took the task; worker was busy and was never handed it" || len(peers.Offers()) != 1 {
			t.Errorf("call %s %q after %d offers", c.status, c.output, len(peers.Offers()))
		}
	})
}

func TestCallingTaskEndsWithAnOfferInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func() (*a2a.Task, error)
		release time.Duration // when the in-flight offer is answered, after the calling task ended
		status  runtimetools.CallStatus
		output  string
		cancels int
	}{
		{"taken", func() (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil }, time.Second, "abandoned",
			"the calling task ended just after worker took the task; a cancel was sent to worker", 1},
		{"busy", busyTask, time.Second, "abandoned",
			"the calling task ended before worker took the task; worker was busy and was never handed it", 0},
		{"no answer in 6s", func() (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil }, 7 * time.Second, "abandoned",
			"the calling task ended while an offer to worker was in flight; worker may hold the task", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				block := make(chan struct{})
				peers := &callstest.Peers{Block: block, OnOffer: func(n int) (*a2a.Task, error) {
					if n == 1 {
						return busyTask()
					}
					return tc.answer()
				}}
				_, calls, cancel := callSession(t, peers, 600)
				calls.Call(context.Background(), "worker", "work")
				time.Sleep(1500 * time.Millisecond) // the second offer is on its way, held by block
				cancel()
				go func() {
					time.Sleep(tc.release)
					close(block)
				}()
				calls.wg.Wait()
				c := onlyCall(calls)
				if c.status != tc.status || c.output != tc.output || len(peers.Cancels()) != tc.cancels {
					t.Errorf("call %s %q, %d cancels; want %s %q, %d", c.status, c.output, len(peers.Cancels()), tc.status, tc.output, tc.cancels)
				}
				time.Sleep(tc.release) // let the held offer finish before the bubble ends
				synctest.Wait()
			})
		})
	}
}

func TestPollingEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		get    func(n int) (*a2a.Task, error)
		status runtimetools.CallStatus
		output string
		after  time.Duration
	}{
		{"two failed reads", func(n int) (*a2a.Task, error) { return nil, errors.New("reset") }, "unreachable", "worker's door stopped answering", time.Second},
		{"one failed read is forgiven", func(n int) (*a2a.Task, error) {
			if n == 1 {
				return nil, errors.New("reset")
			}
			return task(a2a.TaskStateFailed, "it broke"), nil
		}, "failed", "it broke", time.Second},
		{"never finishes", func(n int) (*a2a.Task, error) { return task(a2a.TaskStateWorking, ""), nil }, "timed_out",
			"worker did not answer within 30s. It was not cancelled and may still be working.", 30 * time.Second},
		{"no answer", func(n int) (*a2a.Task, error) {
			t := task(a2a.TaskStateFailed, "nobody knew")
			t.Metadata = map[string]any{ids.Meta: map[string]any{"noAnswer": true, "noAnswerBelow": []any{
				map[string]any{"member": "lead", "status": "timed_out"}, map[string]any{"member": "stranger", "status": "failed"}}}}
			return t, nil
		}, "no_answer", "nobody knew", 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil }, OnGet: tc.get}
				_, calls, cancel := callSession(t, peers, 30)
				defer cancel()
				start := time.Now()
				st, _ := calls.Call(context.Background(), "worker", "work")
				if st.Status != "started" || st.TaskID != "tsk_member" {
					t.Fatalf("start %+v", st)
				}
				calls.wg.Wait()
				c := onlyCall(calls)
				if c.status != tc.status || c.output != tc.output {
					t.Errorf("call %s %q, want %s %q", c.status, c.output, tc.status, tc.output)
				}
				if took := time.Since(start); took != tc.after {
					t.Errorf("the call ended after %s, want %s", took, tc.after)
				}
				if tc.status == "no_answer" && (len(c.below) != 1 || c.below[0] != (NoAnswer{"lead", "timed_out"})) {
					t.Errorf("noAnswerBelow read as %v, want only the roster member", c.below)
				}
			})
		})
	}
}

func TestCallMemberRefusals(t *testing.T) {
	peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil },
		OnGet: func(int) (*a2a.Task, error) { return task(a2a.TaskStateWorking, ""), nil }}
	_, tc, cancel := callSession(t, peers, 600)
	defer func() { tc.Finish(cancel) }()
	ctx := context.Background()
	if _, err := tc.Call(ctx, "critic", "x"); err == nil || err.Error() != `'call-member' cannot call "critic": the members this one may call are worker.` {
		t.Errorf("not callable: %v", err)
	}
	first, _ := tc.Call(ctx, "worker", "x")
	_, err := tc.Call(ctx, "worker", "again")
	want := "worker has not yet answered call " + first.CallID + " from this task, so nothing was sent. Its answer reaches you only after you end your turn: end your turn now by replying without calling a tool. Once that answer has arrived you may call worker again with new work."
	if err == nil || err.Error() != want {
		t.Errorf("second call:\n%v\nwant\n%s", err, want)
	}
	tc.end(onlyCall(tc), "completed", "done", nil, false)
	_, err = tc.Call(ctx, "worker", "again")
	want = "worker has already answered call " + first.CallID + ", so nothing was sent. The answer reaches you as soon as you end your turn: end your turn now by replying without calling a tool."
	if err == nil || err.Error() != want {
		t.Errorf("call before delivery:\n%v\nwant\n%s", err, want)
	}
	if len(peers.Offers()) != 1 {
		t.Errorf("%d offers sent, want only the first call's", len(peers.Offers()))
	}
	tc.noAnswer = new(string)
	tc.Round()
	if _, err := tc.Call(ctx, "worker", "x"); err == nil || err.Error() != "'call-member' makes no call from a task that is ending without an answer." {
		t.Errorf("after end-without-answer: %v", err)
	}
}

func TestEgressRefusesTheDoor(t *testing.T) {
	peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { t.Fatal("an offer was sent"); return nil, nil }}
	_, tc, cancel := callSession(t, peers, 600)
	defer func() { tc.Finish(cancel) }()
	tc.cfg.NetworkAllow = nil
	st, _ := tc.Call(context.Background(), "worker", "x")
	if st.Status != "failed" || !strings.Contains(st.Output, "capabilities.network.allow") || strings.Contains(st.Output, "127.0.0.1") {
		t.Errorf("egress refused: %+v", st)
	}
}

func TestEndWithoutAnswerRefusalsInOrder(t *testing.T) {
	peers := &callstest.Peers{OnOffer: func(int) (*a2a.Task, error) { return task(a2a.TaskStateSubmitted, ""), nil },
		OnGet: func(int) (*a2a.Task, error) { return task(a2a.TaskStateWorking, ""), nil }}
	_, tc, cancel := callSession(t, peers, 600)
	defer func() { tc.Finish(cancel) }()
	check := func(want string) {
		t.Helper()
		if _, err := tc.EndWithoutAnswer("no luck"); err == nil || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
	check("'end-without-answer' ends only a task another formation member sent; no formation member sent this one. Reply in text, saying plainly which part has no answer.")
	tc.cfg.FromPeer, tc.cfg.Caller = true, "boss"
	st, _ := tc.Call(context.Background(), "worker", "x")
	check("Call " + st.CallID + " to worker is still out; its answer arrives after you end your turn. Call end-without-answer only when no call is left to wait for.")
	tc.end(onlyCall(tc), "failed", "broke", nil, false)
	tc.Round()
	if _, err := tc.EndWithoutAnswer("  "); err == nil || err.Error() != "'end-without-answer' needs a reason: say in a sentence why you have no answer." {
		t.Errorf("blank reason: %v", err)
	}
	caller, err := tc.EndWithoutAnswer("worker broke")
	if err != nil || caller != "boss" {
		t.Fatalf("accept: %q %v", caller, err)
	}
	check("This task is already ending without an answer.")
}
