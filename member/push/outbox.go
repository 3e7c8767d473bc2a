package push

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// waitingConfig is a config as enqueue sees it: the status it last queued, how many changes it has
// waiting, and the traceparent of its task, which its changes carry ("" when the task carried none).
type waitingConfig struct {
	k       configKey
	queued  sql.NullString
	waiting int
	trace   string
}

// configsOf reads the configs of a task (all: id "") or one config, for enqueue.
func (n *Notifier) configsOf(ctx context.Context, tx *sql.Tx, task a2a.TaskID, id string) ([]waitingConfig, error) {
	st, err := n.stmt(ctx, tx, qConfigsOf)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, string(task), id, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []waitingConfig
	for rows.Next() {
		c := waitingConfig{k: configKey{task: task}}
		if err := rows.Scan(&c.k.id, &c.queued, &c.waiting, &c.trace); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// enqueue puts a change of status key status (body: what to post) in the outbox of config c, in tx,
// with its task's traceparent, unless the config has it already or has queued its task's end. A full
// outbox gives up its newest waiting change for it.
func (n *Notifier) enqueue(ctx context.Context, tx *sql.Tx, c waitingConfig, status string, body []byte) error {
	if c.queued.Valid && (c.queued.String == status || keyState(c.queued.String).Terminal()) {
		return nil
	}
	if over := c.waiting - n.cfg.Outbox + 1; over > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM push_outbox WHERE seq IN (SELECT seq FROM push_outbox WHERE task_id = ? AND config_id = ? ORDER BY seq DESC LIMIT ?)`,
			string(c.k.task), c.k.id, over); err != nil {
			return err
		}
		n.log.Warn("push: a webhook's outbox is full; its newest waiting change gives way to the latest", "task", c.k.task, "config", c.k.id, "outbox", n.cfg.Outbox)
		for range over {
			n.report(n.cfg.Dropped)
		}
	}
	insert, err := n.stmt(ctx, tx, qInsert)
	if err != nil {
		return err
	}
	if _, err := insert.ExecContext(ctx, string(c.k.task), c.k.id, status, string(body), time.Now().UnixMilli(), c.trace); err != nil {
		return err
	}
	update, err := n.stmt(ctx, tx, qQueued)
	if err != nil {
		return err
	}
	_, err = update.ExecContext(ctx, status, string(c.k.task), c.k.id)
	return err
}

// enqueueOne is enqueue for one config, read first.
func (n *Notifier) enqueueOne(ctx context.Context, tx *sql.Tx, k configKey, status string, body []byte) error {
	cs, err := n.configsOf(ctx, tx, k.task, k.id)
	if err != nil || len(cs) == 0 {
		return err // none: deleted meanwhile
	}
	return n.enqueue(ctx, tx, cs[0], status, body)
}

// write puts the observed changes in the outbox of their tasks' configs, in one transaction.
func (n *Notifier) write(ctx context.Context, batch []change) error {
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, c := range batch {
		cs, err := n.configsOf(ctx, tx, c.task, "")
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			continue
		}
		if c.body == nil { // the observer had no task: post it as stored now
			var task string
			if err := tx.QueryRowContext(ctx, `SELECT task FROM tasks WHERE id = ?`, string(c.task)).Scan(&task); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				return err
			}
			var t a2a.Task
			if err := json.Unmarshal([]byte(task), &t); err != nil {
				return err
			}
			if c.body, err = PostBody(&t); err != nil {
				return err
			}
			c.key = statusKey(t.Status)
		}
		for _, wc := range cs {
			if err := n.enqueue(ctx, tx, wc, c.key, c.body); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// reconcile puts in the outbox the stored status of every task whose configs have not queued it (only
// the ended tasks' when ended): the changes stored while the member was down, or dropped from a full
// queue, or stored by a writer that reports to no hub (the store's recovery).
func (n *Notifier) reconcile(ctx context.Context, ended bool) error {
	rows, err := n.db.QueryContext(ctx, `SELECT p.task_id, p.id, `+sqlStatusKey+`, t.task
		FROM push_configs p JOIN tasks t ON t.id = p.task_id WHERE p.queued IS NOT (`+sqlStatusKey+`)`)
	if err != nil {
		return err
	}
	type stale struct {
		k         configKey
		key, task string
	}
	var todo []stale
	for rows.Next() {
		var s stale
		var task string
		if err := rows.Scan(&task, &s.k.id, &s.key, &s.task); err != nil {
			rows.Close()
			return err
		}
		s.k.task = a2a.TaskID(task)
		if !ended || keyState(s.key).Terminal() {
			todo = append(todo, s)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(todo) == 0 {
		return err
	}
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, s := range todo {
		var t a2a.Task
		if err := json.Unmarshal([]byte(s.task), &t); err != nil {
			return err
		}
		body, err := PostBody(&t)
		if err != nil {
			return err
		}
		if err := n.enqueueOne(ctx, tx, s.k, s.key, body); err != nil {
			return err
		}
	}
	return tx.Commit()
}
