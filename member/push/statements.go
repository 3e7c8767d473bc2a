package push

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The statements the outbox runs once per change, prepared by Open (prepareAll): preparing each anew
// cost a fifth of a delivery.
const (
	// qConfigsOf reads the configs of a task (all, or one) as enqueue needs them, with the traceparent
	// the task store keeps with the task (that of the request that sent it), which each change queued
	// for them carries: read with the configs rather than by a statement of its own.
	qConfigsOf = `SELECT p.id, p.queued,
			(SELECT count(*) FROM push_outbox o WHERE o.task_id = p.task_id AND o.config_id = p.id),
			` + sqlTaskTrace + `
		FROM push_configs p LEFT JOIN tasks t ON t.id = p.task_id
		WHERE p.task_id = ? AND (? = '' OR p.id = ?) ORDER BY p.created, p.id`
	qInsert = `INSERT INTO push_outbox (task_id, config_id, status, body, created, traceparent) VALUES (?, ?, ?, ?, ?, ?)`
	qQueued = `UPDATE push_configs SET queued = ? WHERE task_id = ? AND id = ?`
	qNext   = `SELECT o.seq, p.caller, coalesce(json_extract(p.config, '$.url'), '') FROM push_outbox o
		JOIN push_configs p ON p.task_id = o.task_id AND p.id = o.config_id
		WHERE o.task_id = ? AND o.config_id = ? AND o.seq > ? ORDER BY o.seq LIMIT 1`
	qBody = `SELECT o.body, p.config, o.traceparent FROM push_outbox o
		JOIN push_configs p ON p.task_id = o.task_id AND p.id = o.config_id WHERE o.seq = ?`

	// sqlTaskTrace is qConfigsOf's traceparent: '' in a file whose tasks table is of before the column
	// (the task store's schema 6), where prepareAll reads '' instead.
	sqlTaskTrace = `coalesce(t.traceparent, '')`
)

// prepareAll prepares the outbox's statements on db. It runs before anything else uses db: a statement
// prepared later, inside a transaction, would wait for a second connection that may be waiting for
// the transaction's lock. traced tells whether the tasks table keeps each task's traceparent.
func prepareAll(db *sql.DB, traced bool) (map[string]*sql.Stmt, error) {
	out := map[string]*sql.Stmt{}
	for _, q := range []string{qConfigsOf, qInsert, qQueued, qNext, qBody} {
		text := q
		if !traced {
			text = strings.Replace(q, sqlTaskTrace, "''", 1)
		}
		st, err := db.Prepare(text)
		if err != nil {
			for _, st := range out {
				st.Close()
			}
			return nil, err
		}
		out[q] = st
	}
	return out, nil
}

// stmt returns the prepared statement of q, for tx when tx is not nil (prepared on tx's connection,
// never on another).
func (n *Notifier) stmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	st := n.stmts[q]
	if st == nil {
		return nil, fmt.Errorf("push: statement not prepared: %.40s", q)
	}
	if tx != nil {
		return tx.StmtContext(ctx, st), nil
	}
	return st, nil
}
