package server

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// The defaults of a door's refusal pacer.
const (
	// DefaultRefusalRate is how many refusals a second a door answers at once, with as many in a burst.
	DefaultRefusalRate = 100
	// maxRefusalWait bounds how long one refusal waits for its turn.
	maxRefusalWait = 5 * time.Second
)

// refusalPacer answers refusals (a busy or closed member's TASK_STATE_REJECTED, a request without a valid
// token) at once up to a rate, and beyond it holds each one back for its turn, at most maxRefusalWait.
// Senders in a loop, which a flood is, then send no faster than they are refused: a flood of 1,000
// senders costs the door a few hundred answers a second instead of all its CPU, which the member's
// admitted work needs. A member that is busy now and then refuses at once, as before.
type refusalPacer struct {
	lim    *rate.Limiter
	wait   time.Duration
	onHold func() // counts a refusal held back
}

func newRefusalPacer(perSecond int, onHold func()) *refusalPacer {
	if perSecond <= 0 {
		perSecond = DefaultRefusalRate
	}
	return &refusalPacer{lim: rate.NewLimiter(rate.Limit(perSecond), perSecond), wait: maxRefusalWait, onHold: onHold}
}

// pace waits for the refusal's turn, or ctx's end.
func (p *refusalPacer) pace(ctx context.Context) {
	r := p.lim.Reserve()
	d := r.Delay()
	if d > p.wait {
		r.Cancel()
		d = p.wait
	}
	if d <= 0 {
		return
	}
	p.onHold()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
