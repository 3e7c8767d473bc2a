package events

import "testing"

// A task's change wakes the waiters of that task and no other, and leaves nothing behind.
func TestTaskSignalsWakeOnlyTheirTask(t *testing.T) {
	var ts Signals
	a1, a2, b := ts.Watch("a"), ts.Watch("a"), ts.Watch("b")
	ts.Notify("a")
	for i, sg := range []*Signal{a1, a2} {
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
	ts.Unwatch("a", a1)
	ts.Unwatch("a", a2)
	ts.Unwatch("b", b)
	if len(ts.m) != 0 {
		t.Errorf("%d signals left after every waiter left", len(ts.m))
	}
}
