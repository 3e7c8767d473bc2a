package member

import (
	"context"
	"errors"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/attempt"
	"github.com/murmur-run/murmur/member/calls"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/runtimetools"
)

// fenceUntrusted fences text from the sender of t (the task, its answers to a question) as untrusted
// when t came with that trust class.
func fenceUntrusted(t *a2a.Task, name, text string) string {
	if ids.TrustOf(murmurMeta(t)) == TrustUntrusted {
		return driver.Fence(name, text, "")
	}
	return text
}

// originOf reads back who sent a task: its trust class, origin and calling member, as the session
// stored them when it took the task (for a peer, from its credential, never from what its message says).
func originOf(t *a2a.Task) Origin {
	m := murmurMeta(t)
	o := Origin{Trust: ids.TrustOf(m), Origin: ids.OriginOf(m)}
	o.Caller, _ = m["caller"].(string)
	return o
}

// attemptConfig is the Config of an attempt of the agent task t: its member calls and delegations, as
// its sender may make them, and the session's on-task-end hooks and reopen count.
func (s *Session) attemptConfig(t *a2a.Task) attempt.Config {
	o := originOf(t)
	deadline := calls.DeadlineSecs(s.cfg.Capsule.Lifecycle.DelegationDeadlineSecs, s.cfg.Getenv)
	return attempt.Config{
		Calls: calls.Config{
			Member: s.cfg.Member, Roster: s.cfg.Roster, NetworkAllow: s.cfg.Capsule.Capabilities.Network.Allow,
			DeadlineSecs: deadline, Peers: s.peers, Record: s.records.Write,
			Ended: func(member string, status runtimetools.CallStatus, took time.Duration) {
				s.cfg.Metrics.MemberCalls.WithLabelValues(member, string(status)).Inc()
				s.cfg.Metrics.MemberCallDuration.WithLabelValues(member).Observe(took.Seconds())
			},
			Caller: o.Caller, Trust: o.Trust, FromPeer: o.Origin == OriginPeer, Tracer: s.trc.Tracer(), Caused: s.meter.Caused,
		},
		Delegations: delegate.Config{
			Entries: s.spawn, Depth: s.depth(), DeadlineSecs: deadline, Workdir: s.workdir(),
			Trust: o.Trust, Start: s.startSub, Record: s.records.Write, Caused: s.meter.Caused,
			Ended: func(capsule string, status runtimetools.CallStatus) {
				s.cfg.Metrics.Delegations.WithLabelValues(capsule, string(status)).Inc()
			},
		},
		TaskEnd: s.art.CheckTaskEnd, Reopens: s.meter.Reopens, Reopened: s.meter.Reopened,
	}
}

// begin starts an attempt of the agent task t and makes it the running task's, which call-member,
// delegate-task and end-without-answer answer through; finish ends its calls and delegations and clears
// it, noting for a canceled task how many tasks it gave other members still run.
func (s *Session) begin(ctx context.Context, t *a2a.Task) (a *attempt.Attempt, finish func()) {
	a = attempt.Start(ctx, s.attemptConfig(t), string(t.ID))
	s.mu.Lock()
	r := s.tasks.Running() // t's, until execute hands its end over
	r.Attempt = a
	s.mu.Unlock()
	return a, func() {
		left := a.End()
		s.mu.Lock()
		r.Attempt = nil
		if left > 0 && ctx.Err() != nil {
			r.CallsLeft = left
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

// current returns the attempt of task while it runs; nil otherwise.
func (s *Session) current(task string) *attempt.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.tasks.Running(); r != nil && string(r.ID) == task {
		return r.Attempt
	}
	return nil
}

// CallMember makes one call-member call for the running task (runtimetools.MemberCaller).
func (s *Session) CallMember(ctx context.Context, task, member, text string) (runtimetools.CallStart, error) {
	a := s.current(task)
	if a == nil {
		return runtimetools.CallStart{}, errors.New("'call-member' is answered only while a task runs; this session is running none")
	}
	return a.Calls.Call(ctx, member, text)
}

// EndWithoutAnswer accepts end-without-answer for the running task (runtimetools.NoAnswerEnder); the
// checks run in SPEC's order.
func (s *Session) EndWithoutAnswer(task, reason string) (string, error) {
	if len(s.Callable()) == 0 {
		return "", errors.New("'end-without-answer' is answered only for a formation member that roster.yaml lets call another; this session is not one")
	}
	a := s.current(task)
	if a == nil {
		return "", errors.New("'end-without-answer' is answered only while a task runs; this session is running none")
	}
	return a.Calls.EndWithoutAnswer(reason)
}
