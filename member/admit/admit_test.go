package admit

import (
	"testing"

	"github.com/murmur-run/murmur/member/capsule"
)

// A gate holds the running task and queue_size more; a released place is taken again; the first
// refusal stays.
func TestGateLimitReleaseAndRefusal(t *testing.T) {
	g := New(&capsule.Capsule{TaskAcceptance: capsule.AcceptQueue, QueueSize: 2}, "busy")
	for i := range 3 {
		if r, ok := g.Take(); !ok {
			t.Fatalf("take %d refused: %+v", i, r)
		}
	}
	if r, ok := g.Take(); ok || r != (Refusal{Text: "busy", Busy: true}) {
		t.Fatalf("take past the limit: %+v %v", r, ok)
	}
	g.Release()
	if _, ok := g.Take(); !ok {
		t.Fatal("a released place was not taken again")
	}
	g.Refuse("deadline")
	g.Refuse("shutdown")
	g.Release()
	if r, ok := g.Take(); ok || r != (Refusal{Text: "deadline"}) || !g.Refused() {
		t.Fatalf("after refusals: %+v %v", r, ok)
	}
	if d := New(&capsule.Capsule{TaskAcceptance: capsule.AcceptQueue}, "busy"); d.limit != 1+DefaultQueueSize {
		t.Errorf("default queue: limit %d", d.limit)
	}
}

// A refusal is busy because the gate was full, not because of its text: a session that refuses all work
// with the busy text still does not say busy.
func TestBusyIsNotItsText(t *testing.T) {
	g := New(&capsule.Capsule{}, "task rejected: capsule is busy")
	g.Refuse("task rejected: capsule is busy")
	if r, ok := g.Take(); ok || r.Busy {
		t.Errorf("a refusal of all work with the busy text: %+v %v, want not busy", r, ok)
	}
	full := New(&capsule.Capsule{}, "no room here")
	full.Take()
	if r, ok := full.Take(); ok || r != (Refusal{Text: "no room here", Busy: true}) {
		t.Errorf("a full gate whose busy text is another: %+v %v, want busy", r, ok)
	}
}
