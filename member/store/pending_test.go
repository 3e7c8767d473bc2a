package store

import "testing"

// A pending change superseded by a later write of its task shows that write until the later one
// settles: settling the pending change alone (committed in the same group, settled first) must not
// bring it back, nor leave reads on it while the later write is already committed.
func TestPendingSupersededByALaterWrite(t *testing.T) {
	var p Pending
	p.Put("t", 1, "", []byte("66"))
	p.Supersede("t", 3, "", []byte("68"))
	p.Supersede("other", 3, "", []byte("x")) // no pending change of its own: nothing to show
	if body, _, ok := p.Get("t"); !ok || string(body) != "68" {
		t.Errorf("after a later write: %q, %v; want 68", body, ok)
	}
	if _, _, ok := p.Get("other"); ok {
		t.Error("a task without a pending change shows one after Supersede")
	}
	p.Settled("t", 1)
	if body, _, ok := p.Get("t"); !ok || string(body) != "68" {
		t.Errorf("after the first write settled: %q, %v; want 68 until it settles", body, ok)
	}
	p.Settled("t", 3)
	if body, _, ok := p.Get("t"); ok {
		t.Errorf("after the later write settled: %q still pending", body)
	}
}
