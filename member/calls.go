package member

import (
	"context"
	"errors"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// errNoAnswer ends a task whose model called end-without-answer.
type errNoAnswer struct {
	reason string
	below  []calls.NoAnswer
}

func (e *errNoAnswer) Error() string { return e.reason }

// noAnswer is the error a task ends with once its model called end-without-answer; nil before.
func noAnswer(tc *calls.Tracker) error {
	if reason, ok := tc.NoAnswer(); ok {
		return &errNoAnswer{reason: reason, below: calls.NoAnswerBelow(tc.Latest())}
	}
	return nil
}

// markNoAnswerBelow names, in t's metadata.murmur.noAnswerBelow, the members it called that gave no
// answer, for a task that answers all the same (SPEC), so its caller reads the answer with a gap line.
func markNoAnswerBelow(t *a2a.Task, tc *calls.Tracker) {
	if below := calls.NoAnswerBelow(tc.Latest()); len(below) > 0 {
		ids.Set(murmurMeta(t), ids.MetaNoAnswerBelow, calls.NoAnswerBelowMeta(below))
	}
}

// resume waits for the task's calls and delegations and returns the continuation (calls.Resume), the
// wait shown in the task's WORKING status.
func (s *Session) resume(ctx context.Context, t *a2a.Task, tc *calls.Tracker, dt *delegate.Tracker) (string, []map[string]any, error) {
	return calls.Resume(ctx, tc, dt, func(text string) { s.workingStatus(t, text) })
}

// fenceUntrusted fences text from the sender of t (the task, its answers to a question) as untrusted
// when t came with that trust class.
func fenceUntrusted(t *a2a.Task, name, text string) string {
	if ids.Get(murmurMeta(t), ids.MetaTrust) == TrustUntrusted {
		return driver.Fence(name, text, "")
	}
	return text
}

// startCalls returns the call tracker of one attempt of the agent task t; ctx ends with the attempt.
func (s *Session) startCalls(ctx context.Context, t *a2a.Task) *calls.Tracker {
	o := originOf(t)
	return calls.Start(ctx, calls.Config{
		Member: s.cfg.Member, Roster: s.cfg.Roster, NetworkAllow: s.cfg.Capsule.Capabilities.Network.Allow,
		DeadlineSecs: calls.DeadlineSecs(s.cfg.Capsule.Lifecycle.DelegationDeadlineSecs, s.cfg.Getenv), Peers: s.peers, Record: s.records.Write,
		Ended: func(member, status string, took time.Duration) {
			s.cfg.Metrics.MemberCalls.WithLabelValues(member, status).Inc()
			s.cfg.Metrics.MemberCallDuration.WithLabelValues(member).Observe(took.Seconds())
		},
		Caller: o.Caller, Trust: o.Trust, FromPeer: o.Origin == OriginPeer, Tracer: s.trc.Tracer(), Caused: s.meter.Caused,
		BusyMessage: BusyMessage, TrustTrusted: TrustTrusted, OriginPeer: OriginPeer,
	}, string(t.ID))
}

// beginCalls starts the call tracker of one attempt of the agent task t and makes it the session's
// current one, which call-member and end-without-answer answer through; end ends its calls and clears it.
func (s *Session) beginCalls(ctx context.Context, t *a2a.Task) (tc *calls.Tracker, dt *delegate.Tracker, end func()) {
	cctx, cancel := context.WithCancel(ctx)
	tc = s.startCalls(cctx, t)
	dctx, cancelDelegations := context.WithCancel(ctx)
	dt = s.startDelegations(dctx, t)
	s.mu.Lock()
	s.calls, s.delegations, s.callsTask = tc, dt, string(t.ID)
	s.mu.Unlock()
	return tc, dt, func() {
		tc.Finish(cancel)
		dt.Finish(cancelDelegations)
		left := tc.LeftRunning()
		s.mu.Lock()
		s.calls, s.delegations, s.callsTask = nil, nil, ""
		if left > 0 && ctx.Err() != nil {
			s.callsLeft[string(t.ID)] = left
		}
		s.mu.Unlock()
	}
}

// Callable returns the members this one may call, in roster order.
func (s *Session) Callable() []string {
	if s.cfg.Roster == nil {
		return nil
	}
	return s.cfg.Roster.Reachable(s.cfg.Member)
}

// current returns the call and delegation trackers of task while it runs; nil, nil otherwise.
func (s *Session) current(task string) (*calls.Tracker, *delegate.Tracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.callsTask != task {
		return nil, nil
	}
	return s.calls, s.delegations
}

// CallMember makes one call-member call for the running task (runtimetools.MemberCaller).
func (s *Session) CallMember(ctx context.Context, task, member, text string) (runtimetools.CallStart, error) {
	tc, _ := s.current(task)
	if tc == nil {
		return runtimetools.CallStart{}, errors.New("'call-member' is answered only while a task runs; this session is running none")
	}
	return tc.Call(ctx, member, text)
}

// EndWithoutAnswer accepts end-without-answer for the running task (runtimetools.NoAnswerEnder); the
// checks run in SPEC's order.
func (s *Session) EndWithoutAnswer(task, reason string) (string, error) {
	if len(s.Callable()) == 0 {
		return "", errors.New("'end-without-answer' is answered only for a formation member that roster.yaml lets call another; this session is not one")
	}
	tc, _ := s.current(task)
	if tc == nil {
		return "", errors.New("'end-without-answer' is answered only while a task runs; this session is running none")
	}
	return tc.EndWithoutAnswer(reason)
}
