package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
)

// The defaults of a door's admission.
const (
	// DefaultBodyBudget bounds the bytes of request bodies a door holds at once, read or being read.
	DefaultBodyBudget = 64 << 20
	// admissionWait is how long a request waits for room before it is answered 503.
	admissionWait = 5 * time.Second
	// minBodyWeight is what a request with a small or unknown body is counted as, so the budget also
	// bounds how many requests are read and run at once (DefaultBodyBudget / minBodyWeight).
	minBodyWeight = 16 << 10
)

// admission bounds the memory a door spends on requests: each authenticated request takes, before its
// body is read, a share of a budget as large as its body may be, and gives it back when it is answered
// (a blocking SendMessage gives it back before it waits for its task). A flood therefore queues for the
// budget instead of taking all memory; a request that cannot get its share in time is answered 503.
type admission struct {
	sem    *semaphore.Weighted
	budget int64
	wait   time.Duration
}

func newAdmission(budget int64) *admission {
	if budget <= 0 {
		budget = DefaultBodyBudget
	}
	return &admission{sem: semaphore.NewWeighted(budget), budget: budget, wait: admissionWait}
}

// errDoorFull is the answer to a request that found no room in time.
var errDoorFull = errors.New("door full")

// acquire takes weight bytes of the budget, waiting at most a.wait. The release it returns may be
// called more than once.
func (a *admission) acquire(ctx context.Context, weight int64) (func(), error) {
	weight = min(weight, a.budget)
	// Most requests find room at once: only one that waits pays for the timer of its wait.
	if !a.sem.TryAcquire(weight) {
		ctx, cancel := context.WithTimeout(ctx, a.wait)
		defer cancel()
		if err := a.sem.Acquire(ctx, weight); err != nil {
			return func() {}, fmt.Errorf("%w: this door is reading and running as many requests as its memory budget of %s allows; retry in a moment", errDoorFull, humanBytes(a.budget))
		}
	}
	released := false
	return func() {
		if !released {
			released = true
			a.sem.Release(weight)
		}
	}, nil
}

// bodyWeight is the share of the budget a request takes: its declared length, or the body limit when it
// declares none (a chunked body may be that long), and at least minBodyWeight.
func bodyWeight(contentLength, maxBody int64) int64 {
	if contentLength < 0 || contentLength > maxBody {
		contentLength = maxBody
	}
	return max(contentLength, minBodyWeight)
}
