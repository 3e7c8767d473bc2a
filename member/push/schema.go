package push

import (
	"database/sql"

	"github.com/murmur-run/murmur/a2a"
)

const schema = `CREATE TABLE IF NOT EXISTS push_configs (
	task_id   TEXT    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	id        TEXT    NOT NULL,
	config    TEXT    NOT NULL,  -- the TaskPushNotificationConfig as JSON
	created   INTEGER NOT NULL,  -- unix ms
	PRIMARY KEY (task_id, id)
);
CREATE TABLE IF NOT EXISTS push_outbox (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id   TEXT    NOT NULL,
	config_id TEXT    NOT NULL,
	status    TEXT    NOT NULL,  -- the status key of the change (statusKey)
	body      TEXT    NOT NULL,  -- what is posted: {"task": …} as the task stood at the change
	created   INTEGER NOT NULL,  -- unix ms
	traceparent TEXT  NOT NULL DEFAULT '', -- the task's trace context, which the POST carries
	FOREIGN KEY (task_id, config_id) REFERENCES push_configs (task_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS push_outbox_config ON push_outbox (task_id, config_id, seq)`

// migrate creates the tables, and gives a push_configs of before the outbox its column queued, and one
// of before fair delivery its column caller.
func migrate(db *sql.DB) error {
	if _, err := db.Exec(schema); err != nil {
		return err
	}
	if err := migrateQueued(db); err != nil {
		return err
	}
	// traceparent: the trace context of the task whose change an outbox row holds (DESIGN §17); the rows
	// of before it are posted in no trace.
	if has, err := hasColumn(db, "push_outbox", "traceparent"); err != nil {
		return err
	} else if !has {
		if _, err := db.Exec(`ALTER TABLE push_outbox ADD COLUMN traceparent TEXT NOT NULL DEFAULT ''`); err != nil {
			return err
		}
	}
	has, err := hasColumn(db, "push_configs", "caller")
	if err != nil || has {
		return err
	}
	// caller: who made the config, as the task store names callers ('' for the operator, a member's name
	// for a peer); its deliveries take that caller's slots. A config of before it is taken for its task's
	// caller's (the store's tasks.caller, when the file has one): the one caller but the operator who
	// could make it. In one transaction: a crash half way leaves no column without its callers.
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`ALTER TABLE push_configs ADD COLUMN caller TEXT NOT NULL DEFAULT ''`); err != nil {
		return err
	}
	if _, err := tx.Exec(`CREATE INDEX push_configs_caller ON push_configs (caller)`); err != nil {
		return err
	}
	var callers bool
	if err := tx.QueryRow(`SELECT count(*) > 0 FROM pragma_table_info('tasks') WHERE name = 'caller'`).Scan(&callers); err != nil {
		return err
	}
	if callers {
		if _, err := tx.Exec(`UPDATE push_configs SET caller = coalesce((SELECT t.caller FROM tasks t WHERE t.id = push_configs.task_id), '')`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// migrateQueued gives a push_configs of before the outbox its column queued.
func migrateQueued(db *sql.DB) error {
	has, err := hasColumn(db, "push_configs", "queued")
	if err != nil || has {
		return err
	}
	// queued: the status key of the change last put in the outbox for the config. A config that had
	// delivered its task's current status (the column delivered, of before the outbox) has queued it.
	if _, err := db.Exec(`ALTER TABLE push_configs ADD COLUMN queued TEXT`); err != nil {
		return err
	}
	if old, err := hasColumn(db, "push_configs", "delivered"); err != nil || !old {
		return err
	}
	_, err = db.Exec(`UPDATE push_configs SET queued = (SELECT ` + sqlStatusKey + ` FROM tasks t
		WHERE t.id = push_configs.task_id AND push_configs.delivered IS json_extract(t.task, '$.status'))`)
	return err
}

// hasColumn reports whether table has column.
func hasColumn(db *sql.DB, table, column string) (bool, error) {
	var has bool
	err := db.QueryRow(`SELECT count(*) > 0 FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&has)
	return has, err
}

// watchedTasks returns the tasks that have a config.
func watchedTasks(db *sql.DB) (map[a2a.TaskID]bool, error) {
	rows, err := db.Query(`SELECT DISTINCT task_id FROM push_configs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[a2a.TaskID]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[a2a.TaskID(id)] = true
	}
	return out, rows.Err()
}
