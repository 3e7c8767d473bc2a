package replica

import (
	"context"
	"encoding/json"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Follow-ups and approvals at any replica (DESIGN §16). A task that waits for its sender
// (TASK_STATE_INPUT_REQUIRED) waits inside the replica that runs it: its question is in that process.
// A follow-up that reaches another replica is forwarded through the store (Forward): the owner, told by
// a notice, takes it, hands it to the task's question as if it had come to its own door, and records the
// outcome, which the forwarding replica, told in turn, answers its client with.

// forwardPoll is how often a replica that forwarded an input reads its outcome without being told: what
// covers a lost notice, and an owner that died before answering.
const forwardPoll = 500 * time.Millisecond

// Forward hands msg, a follow-up to task id that this replica does not run, to the replica that runs it
// while it waits for input, and waits for what became of it (Peers): taken when the task took
// it; else refusal says why not (the message does not answer the question: the task keeps waiting), or
// is "" when the task was not, or no longer, waiting at a live replica.
func (c *Coordinator) Forward(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (taken bool, refusal string, err error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return false, "", err
	}
	told := make(chan struct{}, 1)
	n, err := c.cfg.Store.Forward(ctx, id, body, c.cfg.Now())
	if err != nil || n == 0 {
		return false, "", err
	}
	c.forwarded.Store(n, told)
	defer c.forwarded.Delete(n)
	t := time.NewTicker(forwardPoll)
	defer t.Stop()
	for {
		o, err := c.cfg.Store.Outcome(ctx, n)
		switch {
		case err != nil:
			return false, "", err
		case o.Answered && o.Refusal == store.NotWaiting:
			return false, "", nil
		case o.Answered:
			return o.Refusal == "", o.Refusal, nil
		case o.State.Terminal(), !o.Taken && o.State != a2a.TaskStateInputRequired:
			// Ended, or resumed by another answer, before its owner took this one.
			return false, "", nil
		}
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-told:
		case <-t.C:
		}
	}
}

// input handles the notice of an input: an answer wakes the replica that forwarded it; a new one is
// taken by the replica whose session waits on the task.
func (c *Coordinator) input(ctx context.Context, n store.Notice) {
	if n.Answered {
		if ch, ok := c.forwarded.Load(n.Input); ok {
			select {
			case ch.(chan struct{}) <- struct{}{}:
			default:
			}
		}
		return
	}
	c.takeInputs(ctx, n.ID)
}

// takeInputs takes, on a goroutine of its own, the inputs forwarded to task id if the session waits on
// it, and hands each to the task's question in turn.
func (c *Coordinator) takeInputs(ctx context.Context, id a2a.TaskID) {
	if !c.sess.Asks(id) {
		return
	}
	if _, busy := c.taking.LoadOrStore(id, struct{}{}); busy {
		return
	}
	c.wg.Go(func() {
		defer c.taking.Delete(id)
		in, err := c.cfg.Store.TakeInputs(ctx, id)
		if err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("taking the inputs another replica forwarded", "task", id, "err", err)
		}
		for _, i := range in {
			refusal := c.deliver(ctx, id, i.Message)
			if err := c.cfg.Store.Answer(context.WithoutCancel(ctx), i.N, refusal); err != nil {
				c.cfg.Log.Warn("answering an input another replica forwarded", "task", id, "err", err)
			}
		}
	})
}

// deliver hands one forwarded message to the task's question: "" when the task took it, else why not.
func (c *Coordinator) deliver(ctx context.Context, id a2a.TaskID, body []byte) string {
	var msg a2a.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		return "the forwarded message cannot be read: " + err.Error()
	}
	switch waiting, err := c.sess.Deliver(ctx, id, &msg); {
	case !waiting:
		return store.NotWaiting
	case err != nil:
		return err.Error()
	}
	return ""
}

// takeAllInputs takes the inputs of every task the session waits on: what a lost notice would have told.
func (c *Coordinator) takeAllInputs(ctx context.Context) {
	for _, id := range c.sess.Asking() {
		c.takeInputs(ctx, id)
	}
}
