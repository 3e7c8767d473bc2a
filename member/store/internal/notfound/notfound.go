// Package notfound holds the one "not found" of a task store, so that both stores (member/store's
// SQLite one and member/store/postgres) make it the same way while member/store exports only its
// sentinel, store.ErrNotFound.
package notfound

import (
	"fmt"

	"github.com/murmur-run/murmur/a2a"
)

// Err is store.ErrNotFound: what a caller tests with errors.Is. It wraps a2a.ErrTaskNotFound, so the
// wire sees -32001.
var Err = fmt.Errorf("member: task not in the store: %w", a2a.ErrTaskNotFound)

// Task is the error of task id, which the store does not hold (or holds outside the request's scope:
// the same error, so that a peer cannot tell the two apart). It wraps Err and a2a.ErrTaskNotFound with
// the task's id as its wire metadata; the a2a error comes first, so that errors.As finds the one
// carrying the id.
func Task(id a2a.TaskID) error {
	return task{a2a.ErrTaskNotFound.WithMeta("taskId", string(id))}
}

type task struct{ wire *a2a.Error }

func (e task) Error() string {
	return "member: task " + e.wire.Metadata["taskId"] + " not in the store"
}

func (e task) Unwrap() []error { return []error{e.wire, Err} }
