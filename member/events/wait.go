package events

import (
	"context"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Holder is what a wait for a task (Signals.Wait) asks of the session that holds the task, whose every
// change Notifies the task's Signal.
type Holder struct {
	// Read returns the task's stored JSON, which the caller must not modify.
	Read func(ctx context.Context, id a2a.TaskID) ([]byte, error)
	// Unsettled reports that the holder will Notify before its store can show the task terminal or
	// interrupted (it is queued, runs without a question to its sender, or its end waits to be
	// settled): the wait does not read the store then.
	Unsettled func(id a2a.TaskID) bool
	// Elsewhere reports that the task is another replica's, whose changes no Notify here tells: the
	// wait returns it as it stands.
	Elsewhere func(id a2a.TaskID) bool
	// Settled returns once an end the store shows has been settled by the holder, or ctx has ended.
	Settled func(ctx context.Context, id a2a.TaskID)
}

// Wait blocks until task id is terminal or interrupted (waiting for its sender), or ctx ends, and
// returns the task as it then stands, as h.Read's stored JSON: a blocking SendMessage is answered with
// the bytes the store keeps, not decoded and encoded again. It reads the store only when h does not say
// the task is unsettled, and takes the state from the JSON's first keys (store.StateOf).
func (ts *Signals) Wait(ctx context.Context, id a2a.TaskID, h Holder) ([]byte, error) {
	var body []byte
	for {
		sg := ts.Watch(id)
		if !h.Unsettled(id) {
			var state a2a.TaskState
			var err error
			body, err = h.Read(ctx, id)
			if err == nil {
				state, err = store.StateOf(id, body)
			}
			if err != nil || state.Terminal() || state.Interrupted() || h.Elsewhere(id) {
				ts.Unwatch(id, sg)
				if err != nil {
					return nil, err
				}
				if state.Terminal() {
					h.Settled(ctx, id)
				}
				return body, nil
			}
		}
		select {
		case <-sg.Changed():
			ts.Unwatch(id, sg)
		case <-ctx.Done():
			ts.Unwatch(id, sg)
			if body == nil { // not read yet: the task as it stands, whoever still reads the answer
				return h.Read(context.WithoutCancel(ctx), id)
			}
			return body, nil
		}
	}
}
