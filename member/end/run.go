package end

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/converse"
)

// The status texts of the ends a run comes to without an answer (package member names them for its
// callers).
const (
	CanceledText = "task canceled"
	// CanceledCallsRunningText is CanceledText for a task that had member calls outstanding: a cancel
	// does not reach the tasks it gave other members (they keep running, as a call that is abandoned
	// does).
	CanceledCallsRunningText = "task canceled; the %d task(s) it gave other members with call-member keep running, since a cancel does not reach them: cancel each on its member's door (CancelTask) if it should stop"
	ShutdownText             = "task canceled: the member shut down"
	DeadlineText             = "the session reached its deadline, %s, before the task finished"
)

// ErrDeadline is the cause a task's context ends with when its session reaches its deadline.
var ErrDeadline = errors.New("session deadline reached")

// Unanswered is an error that ends a task without an answer and marks it so in the task
// (attempt.NoAnswerError).
type Unanswered interface {
	error
	Mark(t *a2a.Task)
}

// Run is what a task's run came to: what it returned, and what stopped it.
type Run struct {
	Canceled  bool      // Cancel canceled it
	CallsLeft int       // the tasks it gave other members that still ran then
	Cause     error     // the cause its context ended with (context.Cause); nil while it has not
	Shutdown  bool      // the session closed while it ran
	Deadline  time.Time // the session's
	Answer    string
	Data      json.RawMessage // a data answer's value
	Err       error           // what the run returned
	OneTurn   bool            // an answer in one turn is a Message to its sender (capsule.AnswersWithMessage)
}

// Decide is the end of task t the run came to: its state, its status text, and its answer when it
// completed. What stopped it goes first: a cancel, its question's timeout, the deadline, a shutdown;
// then an end without an answer (marked in t), a failure, or the answer (an answer in one turn marked
// so in t, for the door to answer with a Message).
func (r Run) Decide(t *a2a.Task) (a2a.TaskState, string, *Answer) {
	var timedOut *converse.InputTimeout
	var unanswered Unanswered
	switch {
	case r.Canceled && r.CallsLeft > 0:
		return a2a.TaskStateCanceled, fmt.Sprintf(CanceledCallsRunningText, r.CallsLeft), nil
	case r.Canceled:
		return a2a.TaskStateCanceled, CanceledText, nil
	case errors.As(r.Cause, &timedOut):
		return a2a.TaskStateFailed, timedOut.Error(), nil
	case r.Cause == ErrDeadline:
		return a2a.TaskStateFailed, fmt.Sprintf(DeadlineText, r.Deadline.UTC().Format(time.RFC3339)), nil
	case r.Shutdown:
		return a2a.TaskStateCanceled, ShutdownText, nil
	case errors.As(r.Err, &unanswered):
		unanswered.Mark(t)
		return a2a.TaskStateFailed, unanswered.Error(), nil
	case r.Err != nil:
		return a2a.TaskStateFailed, r.Err.Error(), nil
	}
	if r.OneTurn {
		ids.Set(ids.Murmur(t.Metadata), ids.MetaOneTurn, true)
	}
	return a2a.TaskStateCompleted, r.Answer, &Answer{Text: r.Answer, Data: r.Data}
}
