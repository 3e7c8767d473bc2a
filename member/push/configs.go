package push

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
)

// ErrNotFound is the failure of Get for a config the task does not have.
var ErrNotFound = errors.New("push notification config not found")

// Create stores c for caller (who makes it, as the task store names callers: "" for the operator, a
// member's name for a peer; its deliveries take that caller's slots) after checking its URL against
// the allowlist and the bounds of configs per task (ErrTooMany) and per caller (ErrTooManyOfCaller),
// and returns it as stored. Its ID is chosen when empty; a config of the same ID is replaced, with what
// it had waiting, and is not one more. The door has checked that the task exists. The new config gets
// the task's current status first.
func (n *Notifier) Create(ctx context.Context, caller string, c a2a.TaskPushNotificationConfig) (a2a.TaskPushNotificationConfig, error) {
	if _, err := n.cfg.Allow.CheckURL(c.URL); err != nil {
		return c, err
	}
	if c.ID == "" {
		c.ID = "pnc_" + strings.ToLower(ulid.Make().String())
	}
	body, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	// Watched before the task is read: a change stored after the read is observed and queued.
	n.mu.Lock()
	n.watched[c.TaskID] = true
	n.mu.Unlock()
	if n.cfg.Settle != nil {
		if err := n.cfg.Settle(ctx); err != nil {
			return c, err
		}
	}
	tx, err := n.db.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer tx.Rollback()
	if err := n.checkRoom(ctx, tx, caller, c.TaskID, c.ID); err != nil {
		return c, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, string(c.TaskID), c.ID); err != nil {
		return c, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO push_configs (task_id, id, config, created, caller) VALUES (?, ?, ?, ?, ?)`,
		string(c.TaskID), c.ID, string(body), time.Now().UnixMilli(), caller); err != nil {
		return c, err
	}
	var task string
	if err := tx.QueryRowContext(ctx, `SELECT task FROM tasks WHERE id = ?`, string(c.TaskID)).Scan(&task); err != nil {
		return c, fmt.Errorf("push: reading task %s: %w", c.TaskID, err)
	}
	var t a2a.Task
	if err := json.Unmarshal([]byte(task), &t); err != nil {
		return c, err
	}
	post, err := PostBody(&t)
	if err != nil {
		return c, err
	}
	if err := n.enqueueOne(ctx, tx, configKey{c.TaskID, c.ID}, statusKey(t.Status), post); err != nil {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return c, err
	}
	if t.Status.State.Terminal() {
		n.mu.Lock()
		delete(n.watched, c.TaskID)
		n.mu.Unlock()
	}
	n.reread()
	return c, nil
}

// CheckURL checks a webhook URL against the allowlist, as Create does, storing nothing.
func (n *Notifier) CheckURL(u string) error {
	_, err := n.cfg.Allow.CheckURL(u)
	return err
}

// CheckRoom reports whether Create would now take one more config of caller for a task that has none
// yet: ErrTooManyOfCaller when not. It stores nothing; the door asks before it starts a task whose
// message carries a config, so a config refused for its caller starts no task.
func (n *Notifier) CheckRoom(ctx context.Context, caller string) error {
	return n.checkRoom(ctx, n.db, caller, "", "")
}

// querier is what checkRoom reads with: the database, or a transaction of it.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkRoom checks, in q, both bounds for a config id of caller's for task (task "": the caller's bound
// only); a config of that id is replaced, so it is not one more.
func (n *Notifier) checkRoom(ctx context.Context, q querier, caller string, task a2a.TaskID, id string) error {
	if task != "" {
		var count int
		var exists bool
		if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(id = ?), 0) > 0 FROM push_configs WHERE task_id = ?`, id, string(task)).Scan(&count, &exists); err != nil {
			return err
		}
		if !exists && count >= n.cfg.ConfigsPerTask {
			return TooMany(task, count)
		}
	}
	var mine int
	if err := q.QueryRowContext(ctx, qConfigsOfCaller, caller, string(task), id, n.cfg.ConfigsPerCaller).Scan(&mine); err != nil {
		return err
	}
	if mine >= n.cfg.ConfigsPerCaller {
		return TooManyOfCaller(mine)
	}
	return nil
}

// qConfigsOfCaller counts, up to a limit, a caller's configs but one (task, id) that still count toward
// Config.ConfigsPerCaller: those that have not queued their task's end (its state is the status key's
// first word), and those with changes waiting.
const qConfigsOfCaller = `SELECT count(*) FROM (SELECT 1 FROM push_configs p WHERE p.caller = ? AND NOT (p.task_id = ? AND p.id = ?)
	AND (p.queued IS NULL
		OR substr(p.queued, 1, instr(p.queued, ' ') - 1) NOT IN ('` + string(a2a.TaskStateCompleted) + `', '` +
	string(a2a.TaskStateFailed) + `', '` + string(a2a.TaskStateCanceled) + `', '` + string(a2a.TaskStateRejected) + `')
		OR EXISTS (SELECT 1 FROM push_outbox o WHERE o.task_id = p.task_id AND o.config_id = p.id)) LIMIT ?)`

// ErrTooMany is the failure of Create past Config.ConfigsPerTask.
var ErrTooMany = errors.New("too many push notification configs for this task")

// ErrTooManyOfCaller is the failure of Create past Config.ConfigsPerCaller.
var ErrTooManyOfCaller = errors.New("too many push notification configs for one caller")

// TooMany is ErrTooMany for a task that has count configs, saying what to do.
func TooMany(task a2a.TaskID, count int) error {
	return fmt.Errorf("%w: task %s has %d push notification configs, the most one task may have (push.max_configs_per_task of this member's murmur.yaml); delete one with DeleteTaskPushNotificationConfig first, or replace one by giving its id",
		ErrTooMany, task, count)
}

// TooManyOfCaller is ErrTooManyOfCaller for a caller that has count configs that count, saying what to do.
func TooManyOfCaller(count int) error {
	return fmt.Errorf("%w: you have %d push notification configs on tasks that have not ended or with notifications still to deliver, the most one caller may have (push.max_configs_per_caller of this member's murmur.yaml); delete one with DeleteTaskPushNotificationConfig, or wait until your tasks end and their webhooks take what is waiting",
		ErrTooManyOfCaller, count)
}

// Get returns one config of a task.
func (n *Notifier) Get(ctx context.Context, task a2a.TaskID, id string) (a2a.TaskPushNotificationConfig, error) {
	var body string
	err := n.db.QueryRowContext(ctx, `SELECT config FROM push_configs WHERE task_id = ? AND id = ?`, string(task), id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return a2a.TaskPushNotificationConfig{}, ErrNotFound
	}
	var c a2a.TaskPushNotificationConfig
	if err == nil {
		err = json.Unmarshal([]byte(body), &c)
	}
	return c, err
}

// List returns a task's configs, oldest first.
func (n *Notifier) List(ctx context.Context, task a2a.TaskID) ([]a2a.TaskPushNotificationConfig, error) {
	rows, err := n.db.QueryContext(ctx, `SELECT config FROM push_configs WHERE task_id = ? ORDER BY created, id`, string(task))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []a2a.TaskPushNotificationConfig{}
	for rows.Next() {
		var body string
		var c a2a.TaskPushNotificationConfig
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Delete removes a config and what it had waiting; deleting one that does not exist is not an error.
func (n *Notifier) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	_, err := n.db.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, string(task), id)
	return err
}
