package member

import "testing"

// A task's change wakes the waiters of that task and no other, and leaves nothing behind.
func TestTaskSignalsWakeOnlyTheirTask(t *testing.T) {
	var ts taskSignals
	a1, a2, b := ts.watch("a"), ts.watch("a"), ts.watch("b")
	ts.notify("a")
	for i, sg := range []*taskSignal{a1, a2} {
		select {
		case <-sg.ch:
		default:
			t.Errorf("waiter %d of task a was not woken by its change", i)
		}
	}
	select {
	case <-b.ch:
		t.Error("task a's change woke task b's waiter")
	default:
	}
	ts.unwatch("a", a1)
	ts.unwatch("a", a2)
	ts.unwatch("b", b)
	if len(ts.m) != 0 {
		t.Errorf("%d signals left after every waiter left", len(ts.m))
	}
}
