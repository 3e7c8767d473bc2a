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
			t.Fatalf("take %d refused: %q", i, r)
		}
	}
	if r, ok := g.Take(); ok || r != "busy" {
		t.Fatalf("take past the limit: %q %v", r, ok)
	}
	g.Release()
	if _, ok := g.Take(); !ok {
		t.Fatal("a released place was not taken again")
	}
	g.Refuse("deadline")
	g.Refuse("shutdown")
	g.Release()
	if r, ok := g.Take(); ok || r != "deadline" || !g.Refused() {
		t.Fatalf("after refusals: %q %v", r, ok)
	}
	if d := New(&capsule.Capsule{TaskAcceptance: capsule.AcceptQueue}, "busy"); d.limit != 1+DefaultQueueSize {
		t.Errorf("default queue: limit %d", d.limit)
	}
}
