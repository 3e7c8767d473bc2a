package calls

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/usage"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/runtimetools"
)

// The clocks of SPEC's member calls.
const (
	pollEvery          = 500 * time.Millisecond
	firstReoffer       = time.Second
	maxReoffer         = 8 * time.Second
	reofferJitter      = 250 * time.Millisecond
	inFlightWait       = 6 * time.Second
	peerRequestTimeout = 30 * time.Second
)

// Config is what a task's calls are given by the session: plain values and callbacks.
type Config struct {
	Member       string         // this member, the caller of every call
	Roster       *roster.Roster // who may be called, and their doors
	NetworkAllow []string       // capabilities.network.allow: a door outside it is not called
	DeadlineSecs int            // how long one call may take
	Peers        Peers
	// Record writes one record of the task (member_call, member_call_start, member_call_busy).
	Record records.WriteFunc
	// Ended, when set, is told how each call ended and how long it took (metrics).
	Ended func(member string, status runtimetools.CallStatus, took time.Duration)
	// Tracer starts the client span of each request a call makes (DESIGN §17); nil traces none.
	Tracer trace.Tracer
	// Caused, when set, is told the usage the called member's task reports each time a poll reads it
	// (metadata.murmur.usage, its own tree included), by call id: the calling task's caused tokens.
	Caused func(task, call string, u usage.Usage)

	// The calling task: who sent it and with what trust class ("" is trusted, as an operator's task).
	Caller   string
	Trust    ids.Trust
	FromPeer bool // another formation member sent the task
}

// defaultDeadlineSecs is how long one member call may take when neither the capsule nor the environment
// says.
const defaultDeadlineSecs = 600

// DeadlineSecs is how long one call may take: lifecycle.delegation_deadline_secs (capsuleSecs), or
// MUR_DELEGATION_TIMEOUT_SECS (MURMUR_DELEGATION_TIMEOUT_SECS), or 600 seconds.
func DeadlineSecs(capsuleSecs *int, getenv func(string) string) int {
	if n := capsuleSecs; n != nil && *n > 0 {
		return *n
	}
	for _, k := range []string{"MUR_DELEGATION_TIMEOUT_SECS", "MURMUR_DELEGATION_TIMEOUT_SECS"} {
		if n, err := strconv.Atoi(getenv(k)); err == nil && n > 0 {
			return n
		}
	}
	return defaultDeadlineSecs
}

// Peers reaches other members' doors.
type Peers interface {
	Send(ctx context.Context, member string, msg *a2a.Message) (*a2a.Task, error)
	Get(ctx context.Context, member string, id a2a.TaskID) (*a2a.Task, error)
	Cancel(ctx context.Context, member string, id a2a.TaskID) error
}

// Start returns the tracker of one attempt of task; ctx ends with the attempt.
func Start(ctx context.Context, cfg Config, task string) *Tracker {
	tc := &Tracker{cfg: cfg, task: task, ctx: ctx}
	tc.book = NewLedger(LedgerConfig[*memberCall]{Task: task, Type: records.TypeMemberCall, Record: cfg.Record,
		Fields: func(c *memberCall) map[string]any {
			rec := map[string]any{"call_id": c.id, "member": c.member, "status": string(c.status), "delivered": c.delivered,
				"offers": c.offers, "duration_secs": int64(time.Since(c.started) / time.Second)}
			if c.taskID != "" {
				rec["member_task"] = string(c.taskID)
			}
			return rec
		},
		Ended: func(c *memberCall) {
			if cfg.Ended != nil {
				cfg.Ended(c.member, c.status, time.Since(c.started))
			}
		}})
	return tc
}

// Caller is the member that sent the task, "" for the operator's.
func (tc *Tracker) Caller() string { return tc.cfg.Caller }

// Trust is the trust class of the calling task.
func (tc *Tracker) Trust() ids.Trust { return tc.cfg.Trust }

// NoAnswer returns the reason end-without-answer gave, if the model called it.
func (tc *Tracker) NoAnswer() (string, bool) {
	tc.book.mu.Lock()
	defer tc.book.mu.Unlock()
	if tc.noAnswer == nil {
		return "", false
	}
	return *tc.noAnswer, true
}

// ReopenNoAnswer withdraws an accepted end-without-answer, for an attempt an on-task-end hook reopened:
// the reopened attempt may answer, call members, or end without an answer again (SPEC).
func (tc *Tracker) ReopenNoAnswer() {
	tc.book.mu.Lock()
	defer tc.book.mu.Unlock()
	tc.noAnswer = nil
}

// memberCall is one call-member call of the running task.
type memberCall struct {
	id, member, text string
	started          time.Time
	deadline         time.Time
	offers           int
	taskID           a2a.TaskID // the member's task, once it holds it
	parent           trace.Span // the call's tool call span, the parent of its requests' spans

	Mark
	status runtimetools.CallStatus // completed, no_answer, failed, canceled, rejected, timed_out, unreachable, abandoned
	output string
	below  []NoAnswer
	// leftRunning: abandoned while the member worked on its task, which goes on. Set by poll before it
	// ends the call; read once the calls have finished (LeftRunning).
	leftRunning bool
}

// Tracker holds the member calls of one running task. Their goroutines end when the task does.
type Tracker struct {
	cfg      Config
	task     string
	ctx      context.Context      // ends with the calling task's attempt
	book     *Ledger[*memberCall] // the calls; its lock guards their fields and noAnswer
	noAnswer *string
	wg       sync.WaitGroup
}

// Call makes one call-member call for the task (runtimetools.MemberCaller's CallMember).
func (tc *Tracker) Call(ctx context.Context, member, text string) (runtimetools.CallStart, error) {
	callable := tc.cfg.Roster.Reachable(tc.cfg.Member)
	if !slices.Contains(callable, member) {
		return runtimetools.CallStart{}, fmt.Errorf("'call-member' cannot call %q: the members this one may call are %s.", member, strings.Join(callable, ", "))
	}
	tc.book.mu.Lock()
	if tc.noAnswer != nil {
		tc.book.mu.Unlock()
		return runtimetools.CallStart{}, errors.New("'call-member' makes no call from a task that is ending without an answer.")
	}
	for _, c := range tc.book.list {
		if c.member != member || c.delivered {
			continue
		}
		ended := c.ended // read under the ledger's lock, which guards every write of it (End)
		tc.book.mu.Unlock()
		if !ended {
			return runtimetools.CallStart{}, fmt.Errorf("%s has not yet answered call %s from this task, so nothing was sent. Its answer reaches you only after you end your turn: end your turn now by replying without calling a tool. Once that answer has arrived you may call %s again with new work.", member, c.id, member)
		}
		return runtimetools.CallStart{}, fmt.Errorf("%s has already answered call %s, so nothing was sent. The answer reaches you as soon as you end your turn: end your turn now by replying without calling a tool.", member, c.id)
	}
	now := time.Now()
	secs := tc.cfg.DeadlineSecs
	c := &memberCall{id: ids.New("mcl_"), member: member, text: text, started: now, deadline: now.Add(time.Duration(secs) * time.Second),
		parent: trace.SpanFromContext(ctx)}
	tc.book.list = append(tc.book.list, c)
	tc.book.mu.Unlock()

	st := runtimetools.CallStart{CallID: c.id, Member: member, Caller: tc.cfg.Caller, DeadlineSecs: secs}
	peer, _ := tc.cfg.Roster.Member(member)
	if !roster.EgressAllowed(peer.URL, tc.cfg.NetworkAllow) {
		tc.end(c, runtimetools.CallStatusFailed, fmt.Sprintf("%s's door is outside this capsule's capabilities.network.allow, so nothing was sent; the operator must add localhost (or %s's host) to it", member, member), nil, true)
		st.Status, st.Output = runtimetools.CallStatusFailed, c.output
		return st, nil
	}
	c.offers = 1
	task0, err := tc.offer(ctx, c)
	switch {
	case err != nil:
		tc.end(c, runtimetools.CallStatusFailed, peerFailure(member, err), nil, true)
	case busyRefusal(task0):
		tc.busy(c)
		st.Status, st.Output = runtimetools.CallStatusBusy, member+" is busy with other work and did not take the task"
		tc.wg.Go(func() { tc.reoffer(c) })
		return st, nil
	case task0.Status.State == a2a.TaskStateRejected:
		tc.end(c, runtimetools.CallStatusRejected, rejectedSentence(member, task0), nil, true)
	case task0.Status.State.Terminal():
		tc.end(c, runtimetools.CallStatusFailed, fmt.Sprintf("%s's task ended %s at once: %s", member, StateWord(task0.Status.State), statusOf(task0)), nil, true)
	default:
		tc.held(c, task0.ID)
		st.Status, st.TaskID = runtimetools.CallStatusStarted, string(task0.ID)
		tc.wg.Go(func() { tc.poll(c) })
		return st, nil
	}
	st.Status, st.Output = c.status, c.output
	return st, nil
}

// offer sends the call's task to the member once.
func (tc *Tracker) offer(ctx context.Context, c *memberCall) (*a2a.Task, error) {
	trust := tc.cfg.Trust
	if trust == "" {
		trust = ids.TrustTrusted
	}
	msg := &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)),
		Role:      a2a.RoleUser,
		Parts:     []a2a.Part{a2a.TextPart(c.text)},
		Metadata: map[string]any{ids.Meta: ids.NewMeta(map[ids.MetaKey]any{
			ids.MetaCaller: tc.cfg.Member, ids.MetaCallID: c.id, ids.MetaCallerTaskID: tc.task, ids.MetaTrust: string(trust), ids.MetaOrigin: string(ids.OriginPeer),
		})},
	}
	ctx, cancel := context.WithTimeout(ctx, peerRequestTimeout)
	defer cancel()
	ctx, span := tc.clientSpan(ctx, c, a2a.MethodSendMessage, "")
	t, err := tc.cfg.Peers.Send(ctx, c.member, msg)
	endClientSpan(span, t, err)
	return t, err
}

func (tc *Tracker) busy(c *memberCall) {
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = tc.cfg.Record(records.TypeMemberCallBusy, tc.task, map[string]any{"call_id": c.id, "member": c.member, "offer": c.offers})
}

func (tc *Tracker) held(c *memberCall, id a2a.TaskID) {
	tc.book.mu.Lock()
	c.taskID = id
	tc.book.mu.Unlock()
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = tc.cfg.Record(records.TypeMemberCallStart, tc.task, map[string]any{"call_id": c.id, "member": c.member, "member_task": string(id), "offers": c.offers})
}

type offerResult struct {
	task *a2a.Task
	err  error
}

// reoffer offers a busy member the task again (SPEC "A busy member") until it takes it, refuses it
// otherwise, stops answering, the call's deadline passes, or the calling task ends.
func (tc *Tracker) reoffer(c *memberCall) {
	wait := firstReoffer
	silent := 0
	for {
		left := time.Until(c.deadline)
		pause := wait + rand.N(reofferJitter)
		timer := time.NewTimer(min(pause, max(left, 0)))
		select {
		case <-tc.ctx.Done():
			timer.Stop()
			tc.end(c, runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended before %s took the task; %s was busy and was never handed it", c.member, c.member), nil, false)
			return
		case <-timer.C:
		}
		if !time.Now().Before(c.deadline) {
			tc.end(c, runtimetools.CallStatusRejected, fmt.Sprintf("%s stayed busy with other work for the whole %ds this call may wait and never took the task; it was offered the task %d times. Nothing was done on it.",
				c.member, int(c.deadline.Sub(c.started)/time.Second), c.offers), nil, false)
			return
		}
		c.offers++
		res := make(chan offerResult, 1)
		go func() {
			t, err := tc.offer(context.WithoutCancel(tc.ctx), c)
			res <- offerResult{t, err}
		}()
		var r offerResult
		ended := false
		select {
		case r = <-res:
		case <-tc.ctx.Done():
			ended = true
			select {
			case r = <-res:
			case <-time.After(inFlightWait):
				tc.end(c, runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended while an offer to %s was in flight; %s may hold the task", c.member, c.member), nil, false)
				return
			}
		}
		switch {
		case r.err != nil:
			silent++
			if ended || silent >= 2 {
				tc.end(c, runtimetools.CallStatusUnreachable, c.member+"'s door stopped answering", nil, false)
				return
			}
		case busyRefusal(r.task):
			silent = 0
			tc.busy(c)
			if ended {
				tc.end(c, runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended before %s took the task; %s was busy and was never handed it", c.member, c.member), nil, false)
				return
			}
			wait = min(wait*2, maxReoffer)
		case r.task.Status.State == a2a.TaskStateRejected:
			tc.end(c, runtimetools.CallStatusRejected, rejectedSentence(c.member, r.task), nil, false)
			return
		case r.task.Status.State.Terminal():
			tc.end(c, runtimetools.CallStatusFailed, fmt.Sprintf("%s's task ended %s at once: %s", c.member, StateWord(r.task.Status.State), statusOf(r.task)), nil, false)
			return
		default:
			tc.held(c, r.task.ID)
			if ended {
				cctx, cancel := context.WithTimeout(context.Background(), peerRequestTimeout)
				cctx, span := tc.clientSpan(cctx, c, a2a.MethodCancelTask, r.task.ID)
				endClientSpan(span, nil, tc.cfg.Peers.Cancel(cctx, c.member, r.task.ID))
				cancel()
				tc.end(c, runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended just after %s took the task; a cancel was sent to %s", c.member, c.member), nil, false)
				return
			}
			tc.poll(c)
			return
		}
	}
}

// poll reads the member's task every 500 ms until it ends, two reads in a row get no answer, the call's
// deadline passes, or the calling task ends (which leaves the member's task running).
func (tc *Tracker) poll(c *memberCall) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(c.deadline))
	defer deadline.Stop()
	silent := 0
	for {
		select {
		case <-tc.ctx.Done():
			c.leftRunning = true
			tc.end(c, runtimetools.CallStatusAbandoned, fmt.Sprintf("the calling task ended while %s was working on the task; it was left running", c.member), nil, false)
			return
		case <-deadline.C:
			tc.end(c, runtimetools.CallStatusTimedOut, fmt.Sprintf("%s did not answer within %ds. It was not cancelled and may still be working.", c.member, int(c.deadline.Sub(c.started)/time.Second)), nil, false)
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(tc.ctx, peerRequestTimeout)
		ctx, span := tc.clientSpan(ctx, c, a2a.MethodGetTask, c.taskID)
		t, err := tc.cfg.Peers.Get(ctx, c.member, c.taskID)
		endClientSpan(span, t, err)
		cancel()
		if err != nil {
			if tc.ctx.Err() != nil {
				continue
			}
			if silent++; silent >= 2 {
				tc.end(c, runtimetools.CallStatusUnreachable, c.member+"'s door stopped answering", nil, false)
				return
			}
			continue
		}
		silent = 0
		tc.caused(c, t)
		if !t.Status.State.Terminal() {
			continue
		}
		meta := ids.Murmur(t.Metadata)
		switch {
		case t.Status.State == a2a.TaskStateCompleted:
			a, _ := t.Artifact("response")
			tc.end(c, runtimetools.CallStatusCompleted, a.Text(), tc.below(meta), false)
		case t.Status.State == a2a.TaskStateFailed && ids.Get(meta, ids.MetaNoAnswer) == true:
			out := statusOf(t)
			if out == "" {
				out = c.member + " ended its task without an answer"
			}
			tc.end(c, runtimetools.CallStatusNoAnswer, out, tc.below(meta), false)
		default:
			tc.end(c, StateWord(t.Status.State), statusOf(t), nil, false)
		}
		return
	}
}

// caused hands on the usage the member's task t reports (Config.Caused).
func (tc *Tracker) caused(c *memberCall, t *a2a.Task) {
	if tc.cfg.Caused == nil {
		return
	}
	if u, ok := usage.Read(ids.Murmur(t.Metadata)); ok {
		tc.cfg.Caused(tc.task, c.id, u)
	}
}

// below reads a member's metadata.murmur.noAnswerBelow: at most 8, roster members only, not completed.
func (tc *Tracker) below(meta map[string]any) []NoAnswer {
	list, _ := ids.Get(meta, ids.MetaNoAnswerBelow).([]any)
	var out []NoAnswer
	for _, e := range list {
		m, _ := e.(map[string]any)
		name, _ := m["member"].(string)
		s, _ := m["status"].(string)
		st := runtimetools.CallStatus(s)
		if _, ok := tc.cfg.Roster.Member(name); !ok || st == "" || st == runtimetools.CallStatusCompleted || len(out) == 8 {
			continue
		}
		out = append(out, NoAnswer{Member: name, Status: st})
	}
	return out
}

// end records how a call ended. A call that ended in its own tool call is delivered at once.
func (tc *Tracker) end(c *memberCall, status runtimetools.CallStatus, output string, below []NoAnswer, inToolCall bool) {
	tc.book.End(c, inToolCall, func() { c.status, c.output, c.below = status, output, below })
}

// Pending returns the calls still out and those ended but not yet delivered.
func (tc *Tracker) Pending() (out, undelivered int, changed chan struct{}) { return tc.book.Pending() }

// Round takes the ended, undelivered calls, in call order, marks them delivered and returns them with
// every member's latest call.
func (tc *Tracker) Round() (round, latest []CallOutcome) {
	taken, ended := tc.book.Round()
	for _, c := range taken {
		round = append(round, outcome(c))
	}
	return round, latestOf(ended)
}

// Latest returns each member's latest ended call, in the order members were first called.
func (tc *Tracker) Latest() []CallOutcome { return latestOf(tc.book.Ended()) }

// latestOf returns each member's latest call of ended, in the order members were first called.
func latestOf(ended []*memberCall) []CallOutcome {
	var latest []CallOutcome
	seen := map[string]int{}
	for _, c := range ended {
		if i, ok := seen[c.member]; ok {
			latest[i] = outcome(c)
		} else {
			seen[c.member] = len(latest)
			latest = append(latest, outcome(c))
		}
	}
	return latest
}

func outcome(c *memberCall) CallOutcome {
	return CallOutcome{CallID: c.id, Member: c.member, Status: c.status, Output: c.output, Below: c.below}
}

// Finish ends the calls at the end of the task's attempt: every goroutine stops (an offer in flight is
// waited for up to 6 s), outstanding calls end abandoned, and every call not delivered is recorded
// delivered: false.
func (tc *Tracker) Finish(cancel context.CancelFunc) {
	cancel()
	tc.wg.Wait()
	tc.book.Close(func(c *memberCall) {
		c.status, c.output, c.below = runtimetools.CallStatusAbandoned, "the calling task ended", nil
	})
}

// LeftRunning counts the member tasks the end of the calling task's attempt left running (calls
// abandoned while their member worked on them); call it after Finish.
func (tc *Tracker) LeftRunning() int {
	n := 0
	for _, c := range tc.book.Ended() {
		if c.leftRunning {
			n++
		}
	}
	return n
}

// EndWithoutAnswer accepts end-without-answer for the task (runtimetools.NoAnswerEnder), once the
// session has checked that it is a member that may call another and that the task runs; the checks
// run in SPEC's order. It returns the caller the task ends for.
func (tc *Tracker) EndWithoutAnswer(reason string) (string, error) {
	if !tc.cfg.FromPeer || tc.cfg.Caller == "" {
		return "", errors.New("'end-without-answer' ends only a task another formation member sent; no formation member sent this one. Reply in text, saying plainly which part has no answer.")
	}
	tc.book.mu.Lock()
	defer tc.book.mu.Unlock()
	for _, c := range tc.book.list {
		if !c.delivered {
			return "", fmt.Errorf("Call %s to %s is still out; its answer arrives after you end your turn. Call end-without-answer only when no call is left to wait for.", c.id, c.member)
		}
	}
	if strings.TrimSpace(reason) == "" {
		return "", errors.New("'end-without-answer' needs a reason: say in a sentence why you have no answer.")
	}
	if tc.noAnswer != nil {
		return "", errors.New("This task is already ending without an answer.")
	}
	r := strings.TrimSpace(reason)
	tc.noAnswer = &r
	return tc.cfg.Caller, nil
}

// busyRefusal reports whether t is a busy member's refusal: TASK_STATE_REJECTED with exactly the status
// message runtimetools.BusyRefusal, SPEC's rule ("Only a refusal with exactly the message … is offered
// again"). The metadata.murmur.busy mark a murmur member adds decides nothing here: SPEC names the text,
// and a door of another implementation sends the text without the mark.
func busyRefusal(t *a2a.Task) bool {
	return t.Status.State == a2a.TaskStateRejected && statusOf(t) == runtimetools.BusyRefusal
}

// rejectedSentence is SPEC's one sentence for a door's TASK_STATE_REJECTED answer other than busy.
func rejectedSentence(member string, t *a2a.Task) string {
	msg := statusOf(t)
	if msg == "" {
		return member + " did not take the task"
	}
	return member + " did not take the task: " + strings.TrimPrefix(msg, "task rejected: ")
}

// peerFailure says why a call failed without naming the door's address or anything of its token.
func peerFailure(member string, err error) string {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s's door answered with an error: %s", member, ae.Message)
	}
	return member + "'s door could not be reached"
}

func statusOf(t *a2a.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	return t.Status.Message.Text()
}

// StateWord is a terminal state as a call's status: failed, canceled, rejected, completed.
func StateWord(s a2a.TaskState) runtimetools.CallStatus {
	return runtimetools.CallStatus(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")))
}
