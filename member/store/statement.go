package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// getSQL reads one task and its caller: Get's statement, on the read pool.
const getSQL = `SELECT task, caller FROM tasks WHERE id = ?`

// lazyStmt is a statement prepared on its pool at its first use, then kept until the store closes: a
// store that is never written to never connects its writer, and one never read parses no query.
type lazyStmt struct {
	db   *sql.DB
	text string

	stmt atomic.Pointer[sql.Stmt] // set once, under mu

	mu     sync.Mutex // guards the preparing, and closed
	closed bool
}

// get returns the prepared statement, preparing it the first time. A failure is returned and prepared
// again at the next call.
func (l *lazyStmt) get(ctx context.Context) (*sql.Stmt, error) {
	if st := l.stmt.Load(); st != nil {
		return st, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.stmt.Load(); st != nil {
		return st, nil
	}
	if l.closed {
		return nil, errors.New("the task store is closed")
	}
	st, err := l.db.PrepareContext(ctx, l.text)
	if err != nil {
		return nil, err
	}
	l.stmt.Store(st)
	return st, nil
}

// close closes the statement if it was prepared; get fails from then on.
func (l *lazyStmt) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if st := l.stmt.Load(); st != nil {
		return st.Close()
	}
	return nil
}
