package store

import (
	"database/sql"
	"fmt"
	"strconv"
)

// schema holds the store's migrations: schema[i] takes user_version i to i+1. Append, never edit.
var schema = []string{
	`CREATE TABLE tasks (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         TEXT    NOT NULL UNIQUE,
		context_id TEXT    NOT NULL,
		state      TEXT    NOT NULL,
		status_ts  INTEGER,          -- unix ms; NULL when the status has no timestamp
		created    INTEGER NOT NULL, -- unix ms
		task       TEXT    NOT NULL  -- the whole a2a.Task as JSON
	);
	CREATE INDEX tasks_context ON tasks (context_id, seq);
	CREATE INDEX tasks_state ON tasks (state, seq);`,
	// caller: the member that sent the task ('' for the operator's). Tasks stored before it had no caller
	// recorded: a peer's get '?', which no member is called, so they stay the operator's to see.
	`ALTER TABLE tasks ADD COLUMN caller TEXT NOT NULL DEFAULT '';
	UPDATE tasks SET caller = '?' WHERE json_extract(task, '$.metadata.murmur.origin') = 'peer';
	CREATE INDEX tasks_caller ON tasks (caller, seq);`,
	// Retention finds ended tasks by their last status time.
	`CREATE INDEX tasks_ended ON tasks (state, status_ts);`,
	// ListTasks's totalSize without counting the table: the tasks of each state and caller, kept by
	// triggers in the transaction that changes them.
	`CREATE TABLE task_counts (
		state  TEXT    NOT NULL,
		caller TEXT    NOT NULL,
		n      INTEGER NOT NULL,
		PRIMARY KEY (state, caller)
	) WITHOUT ROWID;
	INSERT INTO task_counts (state, caller, n) SELECT state, caller, count(*) FROM tasks GROUP BY state, caller;
	CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
		INSERT INTO task_counts (state, caller, n) VALUES (NEW.state, NEW.caller, 1)
			ON CONFLICT (state, caller) DO UPDATE SET n = n + 1;
	END;
	CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
		UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND caller = OLD.caller;
	END;
	CREATE TRIGGER task_counts_update AFTER UPDATE OF state, caller ON tasks
		WHEN OLD.state IS NOT NEW.state OR OLD.caller IS NOT NEW.caller BEGIN
		UPDATE task_counts SET n = n - 1 WHERE state = OLD.state AND caller = OLD.caller;
		INSERT INTO task_counts (state, caller, n) VALUES (NEW.state, NEW.caller, 1)
			ON CONFLICT (state, caller) DO UPDATE SET n = n + 1;
	END;`,
	// message_id: the id of the message that created the task, so a SendMessage retried with the same
	// messageId finds the task it created (GetByMessage). Tasks stored before it have none.
	`ALTER TABLE tasks ADD COLUMN message_id TEXT NOT NULL DEFAULT '';
	CREATE INDEX tasks_message ON tasks (caller, message_id) WHERE message_id != '';`,
	// traceparent: the W3C traceparent of the request that sent the task ('' when it carried none), in
	// whose trace its push notifications are posted (DESIGN §17).
	`ALTER TABLE tasks ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';`,
}

// migrate brings the schema to the newest version, in one transaction.
func migrate(db *sql.DB) (err error) {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var version int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(schema) {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, len(schema))
	}
	if version == len(schema) {
		return tx.Rollback()
	}
	for _, step := range schema[version:] {
		if _, err := tx.Exec(step); err != nil {
			return fmt.Errorf("schema version %d: %w", version+1, err)
		}
		version++
	}
	if _, err := tx.Exec(`PRAGMA user_version = ` + strconv.Itoa(version)); err != nil {
		return err
	}
	return tx.Commit()
}
