package callstest

import (
	"context"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Peers answers offers and reads from scripts, and notes when each offer arrived.
type Peers struct {
	OnOffer func(n int) (*a2a.Task, error) // the answer to the nth offer (SendMessage), n counting from 1
	OnGet   func(n int) (*a2a.Task, error) // the answer to the nth read (GetTask)
	Block   chan struct{}                  // when set, offers after the first wait on it

	mu      sync.Mutex
	offers  []time.Time
	gets    int
	cancels []a2a.TaskID
}

// Send answers an offer with OnOffer.
func (f *Peers) Send(ctx context.Context, member string, msg *a2a.Message) (*a2a.Task, error) {
	f.mu.Lock()
	f.offers = append(f.offers, time.Now())
	n := len(f.offers)
	block := f.Block
	f.mu.Unlock()
	if block != nil && n > 1 {
		<-block
	}
	return f.OnOffer(n)
}

// Get answers a read with OnGet.
func (f *Peers) Get(ctx context.Context, member string, id a2a.TaskID) (*a2a.Task, error) {
	f.mu.Lock()
	f.gets++
	n := f.gets
	f.mu.Unlock()
	return f.OnGet(n)
}

// Cancel notes the cancel.
func (f *Peers) Cancel(ctx context.Context, member string, id a2a.TaskID) error {
	f.mu.Lock()
	f.cancels = append(f.cancels, id)
	f.mu.Unlock()
	return nil
}

// Offers returns when each offer arrived.
func (f *Peers) Offers() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.offers...)
}

// Gets returns how many reads there were.
func (f *Peers) Gets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

// Cancels returns the tasks canceled, in order.
func (f *Peers) Cancels() []a2a.TaskID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]a2a.TaskID(nil), f.cancels...)
}
