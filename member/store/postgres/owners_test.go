package postgres

import (
	"maps"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// TestOwners: Owners maps the unended tasks a replica claimed, or created, to it, whichever replica
// asks; an unclaimed task and an ended one are left out, and a task a replica claimed from the queue is
// that replica's.
func TestOwners(t *testing.T) {
	ctx := t.Context()
	c := newClock(epoch)
	r1, dsn := open(t, c.cfg("r1"))
	r2, _ := open(t, c.cfg("r2"), dsn)
	renew(t, r1, time.Minute)
	renew(t, r2, time.Minute)
	if got, err := r1.Owners(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Owners with no task = %v, %v; want an empty map", got, err)
	}
	mustCreate(t, r1, task(1, "ctx", a2a.TaskStateWorking), task(2, "ctx", a2a.TaskStateCompleted))
	mustCreate(t, r2, task(3, "ctx", a2a.TaskStateInputRequired))
	for n := 4; n <= 5; n++ {
		if ok, err := r1.Offer(ctx, task(n, "ctx", a2a.TaskStateSubmitted), 10); err != nil || !ok {
			t.Fatalf("Offer %d = %v, %v", n, ok, err)
		}
	}
	if claimed, err := r2.Claim(ctx, 1); err != nil || len(claimed) != 1 || claimed[0].ID != task(4, "", "").ID {
		t.Fatalf("Claim = %v, %v; want task 4", claimed, err)
	}
	want := map[a2a.TaskID]string{task(1, "", "").ID: "r1", task(3, "", "").ID: "r2", task(4, "", "").ID: "r2"}
	for _, s := range []*Store{r1, r2} {
		got, err := s.Owners(ctx)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("%s's Owners = %v, %v; want %v (not the completed task 2, nor the unclaimed task 5)", s.Replica(), got, err, want)
		}
	}
	if err := r1.Update(ctx, task(1, "ctx", a2a.TaskStateCompleted)); err != nil {
		t.Fatal(err)
	}
	got, err := r2.Owners(ctx)
	delete(want, task(1, "", "").ID)
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("Owners after task 1 completed = %v, %v; want %v", got, err, want)
	}
}
