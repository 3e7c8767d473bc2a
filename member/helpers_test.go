package member

import (
	"context"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// unjoin returns the errors joined in err (err itself when it joins none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func ptrTo[T any](v T) *T { return &v }

// fakePeers answers offers and reads from scripts, and notes when each offer arrived.
type fakePeers struct {
	mu      sync.Mutex
	offer   func(n int) (*a2a.Task, error) // n counts from 1
	get     func(n int) (*a2a.Task, error)
	offers  []time.Time
	gets    int
	cancels []a2a.TaskID
	block   chan struct{} // when set, offers after the first wait on it
}

func (f *fakePeers) Send(ctx context.Context, member string, msg *a2a.Message) (*a2a.Task, error) {
	f.mu.Lock()
	f.offers = append(f.offers, time.Now())
	n := len(f.offers)
	block := f.block
	f.mu.Unlock()
	if block != nil && n > 1 {
		<-block
	}
	return f.offer(n)
}

func (f *fakePeers) Get(ctx context.Context, member string, id a2a.TaskID) (*a2a.Task, error) {
	f.mu.Lock()
	f.gets++
	n := f.gets
	f.mu.Unlock()
	return f.get(n)
}

func (f *fakePeers) Cancel(ctx context.Context, member string, id a2a.TaskID) error {
	f.mu.Lock()
	f.cancels = append(f.cancels, id)
	f.mu.Unlock()
	return nil
}
