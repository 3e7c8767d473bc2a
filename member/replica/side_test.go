package replica

import (
	"context"
	"testing"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/admit"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/converse"
	"github.com/murmur-run/murmur/member/events"
)

// fakePeers is the member's other replicas: each offer is taken when take says so.
type fakePeers struct {
	Peers
	take    bool
	offered []a2a.TaskID
}

func (p *fakePeers) Offer(ctx context.Context, t *a2a.Task, perReplica int) (bool, error) {
	p.offered = append(p.offered, t.ID)
	return p.take, nil
}

// A member of one process only takes places; on replicas, a busy session, and one whose place would be
// a wait, offers the task to the others, and keeps it when none takes it.
func TestAdmit(t *testing.T) {
	side := func(peers Peers, idle bool) (*Side, *admit.Gate) {
		gate := admit.New(&capsule.Capsule{}, "busy")
		return NewSide(SideConfig{Peers: peers, Gate: gate, Idle: func() bool { return idle }}), gate
	}
	task := &a2a.Task{ID: "t"}

	one, gate := side(nil, false)
	if a := one.Admit(t.Context(), task, nil); !a.Placed {
		t.Fatalf("one process, free: %+v", a)
	}
	if a := one.Admit(t.Context(), task, nil); a.Placed || a.Handed || !a.Refusal.Busy {
		t.Errorf("one process, busy: %+v; want refused as busy", a)
	}
	gate.Release()

	taking := &fakePeers{take: true}
	busy, gate := side(taking, false)
	gate.Take()
	if a := busy.Admit(t.Context(), task, nil); !a.Handed || a.Answer != task || len(taking.offered) != 1 {
		t.Errorf("replicas, busy: %+v; want handed to the others", a)
	}

	waiting, _ := side(taking, false) // a place, but behind this replica's running task
	if a := waiting.Admit(t.Context(), task, nil); !a.Handed || len(taking.offered) != 2 {
		t.Errorf("replicas, a place that is a wait: %+v; want offered", a)
	}
	keeping, _ := side(&fakePeers{}, false)
	if a := keeping.Admit(t.Context(), task, nil); !a.Placed {
		t.Errorf("replicas, nobody takes it: %+v; want kept here", a)
	}
	idle, _ := side(&fakePeers{take: true}, true)
	if a := idle.Admit(t.Context(), task, nil); !a.Placed {
		t.Errorf("replicas, idle: %+v; want placed here", a)
	}
}

// Deliver reports a task that waits on no question as not waiting, not as an error; a member of one
// process hands nothing elsewhere.
func TestDeliverAndOneProcess(t *testing.T) {
	s := NewSide(SideConfig{Waiter: converse.NewWaiter(), Waits: &events.Signals{}})
	if waiting, err := s.Deliver(t.Context(), "t", &a2a.Message{}); waiting || err != nil {
		t.Errorf("Deliver to a task that asks nothing = %v, %v", waiting, err)
	}
	if s.Asks("t") || len(s.Asking()) != 0 {
		t.Error("a task that asks nothing is asking")
	}
	if ids, err := s.Release(t.Context(), []a2a.TaskID{"t"}); ids != nil || err != nil {
		t.Errorf("Release on one process = %v, %v", ids, err)
	}
	if _, done, err := s.CancelElsewhere(t.Context(), "t"); done || err != nil {
		t.Errorf("CancelElsewhere on one process = %v, %v", done, err)
	}
	if c := s.Converse(converse.Config{}); c.Forward != nil || c.Files != nil || s.PeerFiles() != nil {
		t.Error("one process forwards or keeps files in a shared store")
	}
}
