package member

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/delegate"
	"github.com/murmur-run/murmur/member/metrics"
	"github.com/murmur-run/murmur/member/spans"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/runtimetools"
)

// OriginDelegation is the origin of a sub-session's task: its parent's delegate-task handed it over.
const OriginDelegation = ids.OriginDelegation

// SubSession is set in the Config of a sub-session (DESIGN §11): whose delegation it serves, how deep
// it is, and the deadline it inherits.
type SubSession struct {
	Parent     string    // the delegating session's ses_ id
	Delegation string    // dlg_…
	Depth      int       // 1 for a formation member's sub-capsule
	Deadline   time.Time // the parent's effective deadline; zero: none
}

// depth is how deep this session is in a chain of delegations: 0 for a formation member.
func (s *Session) depth() int {
	if s.cfg.Sub == nil {
		return 0
	}
	return s.cfg.Sub.Depth
}

// Capsules returns the bare names of capabilities.spawn.allow (runtimetools.Delegator).
func (s *Session) Capsules() []string { return delegate.Names(s.spawn) }

// Delegate starts one delegation for the running task (runtimetools.Delegator).
func (s *Session) Delegate(ctx context.Context, task, capsule, text string) (runtimetools.DelegationStart, error) {
	a := s.current(task)
	if a == nil {
		return runtimetools.DelegationStart{}, fmt.Errorf("'delegate-task' is answered only while a task runs; this session is running none")
	}
	return a.Delegations.Delegate(ctx, capsule, text)
}

// startSub starts the sub-session of one delegation: in this process, no door, its own ses_ id and
// records, its workdir under this one's, a task store of its own in this session's records directory
// (delegate.Open), and the earlier of its own deadline and this session's (set once, in Start). It holds
// no formation token, but is given this session's secrets (that token among them) to keep out of the
// environment of every program it starts.
func (s *Session) startSub(spec delegate.StartSpec) (delegate.Sub, error) {
	return delegate.Open(s.records.Dir(), spec, func(st *store.Store) (*delegate.Session, error) {
		series, err := metrics.New(prometheus.NewRegistry()) // a sub-session's own series are on no door
		if err != nil {
			return nil, err
		}
		sub, err := Start(Config{
			Member: s.cfg.Member, Formation: s.cfg.Formation, Capsule: spec.Entry.Capsule, Store: st,
			RecordsRoot: s.cfg.RecordsRoot, DataDir: s.cfg.DataDir, WorkDir: spec.Workdir, RuntimeRoot: s.cfg.RuntimeRoot,
			WasmCacheDir: s.cfg.WasmCacheDir, ProjectDir: s.cfg.ProjectDir, Metrics: series, Logger: s.log,
			Now: s.cfg.Now, Getenv: s.cfg.Getenv, HTTPClient: s.cfg.HTTPClient, ConfineHelper: s.cfg.ConfineHelper,
			StartToolServer: s.cfg.StartToolServer, Isolate: s.hostIso, Secrets: s.runner.Secrets(),
			TracerProvider: s.cfg.TracerProvider,
			Sub:            &SubSession{Parent: s.id, Delegation: spec.Delegation, Depth: spec.Depth, Deadline: s.deadline},
		})
		if err != nil {
			return nil, err
		}
		sub.trc.Delegated(spans.Delegation{ID: spec.Delegation, Capsule: spec.Entry.Name, Depth: spec.Depth})
		return &delegate.Session{SessionID: sub.id, WaitTask: sub.Wait, CloseAll: sub.Close,
			SendTask: func(ctx context.Context, msg *a2a.Message, trust ids.Trust) (*a2a.Task, error) {
				return sub.Send(ctx, msg, Origin{Trust: trust, Origin: OriginDelegation})
			},
			CancelTask: func(ctx context.Context, id a2a.TaskID) error {
				_, err := sub.Cancel(ctx, id, store.OperatorScope())
				return err
			}}, nil
	})
}
