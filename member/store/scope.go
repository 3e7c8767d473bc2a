package store

import (
	"context"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store/internal/notfound"
)

// Scope says whose tasks a request may see: the operator's requests see every task, a peer's only the
// tasks that peer sent. The zero Scope sees none. A task outside a request's scope is answered exactly as
// a task the store does not hold, so a peer cannot learn that it exists.
type Scope struct {
	all    bool
	caller string
}

// OperatorScope is the scope of the operator's requests: every task.
func OperatorScope() Scope { return Scope{all: true} }

// PeerScope is the scope of a peer's requests: the tasks member sent.
func PeerScope(member string) Scope { return Scope{caller: member} }

// sees reports whether a task sent by caller ("" for the operator) is in the scope.
func (sc Scope) sees(caller string) bool { return sc.all || (sc.caller != "" && sc.caller == caller) }

// GetInScope returns a stored task in scope, whole, as its JSON; a task outside the scope is not
// stored (ErrNotFound, the same error). The caller must not modify the bytes.
func (s *Store) GetInScope(ctx context.Context, id a2a.TaskID, sc Scope) ([]byte, error) {
	body, caller, err := s.getWithCaller(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sc.sees(caller) {
		return nil, notfound.Task(id)
	}
	return body, nil
}

// ListInScope returns one page of the tasks in scope.
func (s *Store) ListInScope(ctx context.Context, q ListQuery, sc Scope) (ListPage, error) {
	switch {
	case sc.all:
	case sc.caller == "":
		return ListPage{}, nil
	default:
		q.Caller = sc.caller
	}
	return s.list(ctx, q)
}

// All reports whether the scope sees every task (the operator's).
func (sc Scope) All() bool { return sc.all }

// Caller is the member whose tasks a peer's scope sees; "" for the operator's scope and the zero Scope.
func (sc Scope) Caller() string { return sc.caller }

// Sees reports whether a task sent by caller ("" for the operator) is in the scope.
func (sc Scope) Sees(caller string) bool { return sc.sees(caller) }
