package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations take the schema from version i to i+1 (migrations[i]). Append, never edit: a database
// remembers its version in murmur_schema, and a program refuses a database newer than it.
//
// The tasks table is the SQLite store's, plus what DESIGN §16's replicas will need: version, bumped by
// every write of a task (for writes on a stale version, later), and seq, an identity numbering tasks in
// the order they were created (ListTasks' pages, newest first). The task is its JSON as json.Marshal
// wrote it, in bytea rather than jsonb, so that it comes back byte for byte.
var migrations = []string{
	`CREATE TABLE tasks (
		seq        bigint GENERATED ALWAYS AS IDENTITY,
		id         text   PRIMARY KEY,
		context_id text   NOT NULL,
		state      text   NOT NULL,
		status_ts  bigint,           -- unix ms; NULL when the status has no timestamp
		created    bigint NOT NULL,  -- unix ms
		caller     text   NOT NULL DEFAULT '', -- the member that sent the task; '' for the operator's
		version    bigint NOT NULL,  -- 1 when created, +1 by every write of the task
		task       bytea  NOT NULL   -- the whole a2a.Task as JSON
	);
	CREATE UNIQUE INDEX tasks_seq ON tasks (seq);
	CREATE INDEX tasks_context ON tasks (context_id, seq);
	CREATE INDEX tasks_state ON tasks (state, seq);
	CREATE INDEX tasks_caller ON tasks (caller, seq);
	CREATE INDEX tasks_ended ON tasks (state, status_ts);`,
	// message_id: the id of the message that created the task, so that a SendMessage retried with the
	// same messageId finds the task it created (GetByMessage).
	`ALTER TABLE tasks ADD COLUMN message_id text NOT NULL DEFAULT '';
	CREATE INDEX tasks_message ON tasks (caller, message_id) WHERE message_id <> '';`,
	// Replicas (DESIGN §16): each task's owner, the replica that runs it ('' while unclaimed, and in a
	// member of one process); cancel_requested, a cancellation asked of its owner (RequestCancel), kept
	// once the task ends, since the notification tells it only of an unended task; the replicas' leases
	// (unix ms); and a notification of every change of a task on channel murmur_tasks (Watch), "id
	// version owner state cancel", the version keeping two changes of one task in one transaction from
	// being merged into one notification (PostgreSQL drops a payload equal to one already queued).
	`ALTER TABLE tasks ADD COLUMN owner text NOT NULL DEFAULT '';
	ALTER TABLE tasks ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
	CREATE INDEX tasks_owner ON tasks (owner, state, seq)
		WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED');
	CREATE TABLE replicas (
		name        text   PRIMARY KEY,
		started     bigint NOT NULL,
		lease_until bigint NOT NULL,
		free        int    NOT NULL DEFAULT 0
	);
	CREATE FUNCTION murmur_task_notify() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify('murmur_tasks', NEW.id || ' ' || NEW.version || ' ' || NEW.owner || ' ' || NEW.state || ' ' ||
			CASE WHEN NEW.cancel_requested AND NEW.state IN
				('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED')
			THEN '1' ELSE '0' END);
		RETURN NULL;
	END $$;
	CREATE TRIGGER tasks_notify AFTER INSERT OR UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION murmur_task_notify();`,
	// Each task's events (DESIGN §16), what a stream on any replica sends after the task as it stands:
	// numbered from 1 per task, written by the trigger below in the transaction of the change they
	// describe, whichever statement made it (a write of the owner, an end by Reap, RequestCancel or
	// Recover), so no write path can forget them. event_seq is the number of the task's last event, read
	// with the task in one statement (Follow). An artifactUpdate for each artifact the change added, then
	// a statusUpdate when the status differs; an UPDATE that leaves the JSON as it was (Note's) writes none.
	// The events are A2A StreamResponse objects as jsonb writes them (same fields, keys in jsonb's order).
	`ALTER TABLE tasks ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
	CREATE TABLE task_events (
		task_id text   NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
		seq     bigint NOT NULL,
		event   bytea  NOT NULL,
		PRIMARY KEY (task_id, seq)
	);
	CREATE FUNCTION murmur_task_events() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		was jsonb := convert_from(OLD.task, 'UTF8')::jsonb;
		cur jsonb := convert_from(NEW.task, 'UTF8')::jsonb;
		had int := COALESCE(jsonb_array_length(was->'artifacts'), 0);
		has int := COALESCE(jsonb_array_length(cur->'artifacts'), 0);
	BEGIN
		FOR i IN had .. has - 1 LOOP
			NEW.event_seq := NEW.event_seq + 1;
			INSERT INTO task_events (task_id, seq, event) VALUES (NEW.id, NEW.event_seq, convert_to(jsonb_build_object(
				'artifactUpdate', jsonb_build_object('taskId', NEW.id, 'contextId', NEW.context_id,
					'artifact', cur->'artifacts'->i, 'lastChunk', true))::text, 'UTF8'));
		END LOOP;
		IF (cur->'status') IS DISTINCT FROM (was->'status') THEN
			NEW.event_seq := NEW.event_seq + 1;
			INSERT INTO task_events (task_id, seq, event) VALUES (NEW.id, NEW.event_seq, convert_to(jsonb_build_object(
				'statusUpdate', jsonb_build_object('taskId', NEW.id, 'contextId', NEW.context_id,
					'status', cur->'status'))::text, 'UTF8'));
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER tasks_events BEFORE UPDATE ON tasks FOR EACH ROW
		WHEN (OLD.task IS DISTINCT FROM NEW.task) EXECUTE FUNCTION murmur_task_events();`,
	// The inputs a replica forwards to the replica running a task that waits for its sender (DESIGN §16:
	// follow-ups and approvals at any replica): n numbers them; the owner takes an input (taken), hands it
	// to the task's question, and answers with refusal ('' when the task took it). Each insert and update
	// notifies channel murmur_inputs, "n answered task-id" (the id last: a client's id may hold spaces).
	`CREATE TABLE task_inputs (
		n        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		task_id  text    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
		message  bytea   NOT NULL,
		taken    boolean NOT NULL DEFAULT false,
		answered boolean NOT NULL DEFAULT false,
		refusal  text    NOT NULL DEFAULT ''
	);
	CREATE INDEX task_inputs_open ON task_inputs (task_id, n) WHERE NOT taken;
	CREATE FUNCTION murmur_input_notify() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify('murmur_inputs', NEW.n || ' ' || CASE WHEN NEW.answered THEN '1' ELSE '0' END || ' ' || NEW.task_id);
		RETURN NULL;
	END $$;
	CREATE TRIGGER task_inputs_notify AFTER INSERT OR UPDATE ON task_inputs FOR EACH ROW EXECUTE FUNCTION murmur_input_notify();`,
	// Push notification configs and their outbox (DESIGN §16: push delivery at any replica; package
	// member/push/pgpush reads and writes them). A config keeps its webhook's URL beside its JSON, who
	// made it (caller: its deliveries take that caller's slots) and ended, set once its task's end was
	// queued to it: nothing is queued after that. The trigger below queues each change of a task's
	// status to every config of the task, as {"task": …} without its history, in the transaction of the
	// change, whichever replica or statement made it; a config's outbox keeps 100 changes (schema 9: its
	// own bound), a change finding it full taking the place of the newest one waiting (the oldest waiting
	// and the latest are delivered). A row is delivered by the replica that claims it (claimed_by until claimed_until, unix
	// ms), one at a time per config in seq order; attempts counts its failed posts and due (unix ms) is
	// when it may be tried again. Channel murmur_push tells the replicas a change was queued.
	`CREATE TABLE push_configs (
		task_id text    NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
		id      text    NOT NULL,
		config  bytea   NOT NULL,
		url     text    NOT NULL,
		caller  text    NOT NULL,
		created bigint  NOT NULL,
		ended   boolean NOT NULL DEFAULT false,
		PRIMARY KEY (task_id, id)
	);
	CREATE INDEX push_configs_caller ON push_configs (caller);
	CREATE TABLE push_outbox (
		seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		task_id       text   NOT NULL,
		config_id     text   NOT NULL,
		body          bytea  NOT NULL,
		attempts      int    NOT NULL DEFAULT 0,
		due           bigint NOT NULL DEFAULT 0,
		claimed_by    text   NOT NULL DEFAULT '',
		claimed_until bigint NOT NULL DEFAULT 0,
		FOREIGN KEY (task_id, config_id) REFERENCES push_configs (task_id, id) ON DELETE CASCADE
	);
	CREATE INDEX push_outbox_config ON push_outbox (task_id, config_id, seq);
	CREATE FUNCTION murmur_task_push() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		cur  jsonb;
		body bytea;
		c    record;
	BEGIN
		IF NOT EXISTS (SELECT 1 FROM push_configs WHERE task_id = NEW.id AND NOT ended) THEN
			RETURN NULL;
		END IF;
		cur := convert_from(NEW.task, 'UTF8')::jsonb;
		IF (cur->'status') IS NOT DISTINCT FROM (convert_from(OLD.task, 'UTF8')::jsonb->'status') THEN
			RETURN NULL;
		END IF;
		body := convert_to(jsonb_build_object('task', cur - 'history')::text, 'UTF8');
		FOR c IN SELECT id FROM push_configs WHERE task_id = NEW.id AND NOT ended LOOP
			IF (SELECT count(*) FROM push_outbox WHERE task_id = NEW.id AND config_id = c.id) >= 100 THEN
				DELETE FROM push_outbox WHERE seq = (SELECT max(seq) FROM push_outbox
					WHERE task_id = NEW.id AND config_id = c.id AND claimed_by = '');
			END IF;
			INSERT INTO push_outbox (task_id, config_id, body) VALUES (NEW.id, c.id, body);
		END LOOP;
		IF NEW.state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED') THEN
			UPDATE push_configs SET ended = true WHERE task_id = NEW.id;
		END IF;
		PERFORM pg_notify('murmur_push', NEW.id);
		RETURN NULL;
	END $$;
	CREATE TRIGGER tasks_push AFTER UPDATE ON tasks FOR EACH ROW
		WHEN (OLD.task IS DISTINCT FROM NEW.task) EXECUTE FUNCTION murmur_task_push();`,
	// The files a member's replicas share (DESIGN §16: peer files and artifacts of answers at any
	// replica; files.go): a peer file share-file copied, under its SHA-256 (one row however often it is
	// shared), kept until expires (unix ms), the expiry of the last handle minted for it, and removed by
	// the sweeper after; an artifact file too large to carry inline, under its task and name, removed
	// with its task. created is unix ms. The bytes are in shared_file_chunks, fileChunk bytes a row
	// (the last one shorter), numbered from 0, so that a file is read and written a part at a time;
	// stored as they are, uncompressed (STORAGE EXTERNAL), since such files are mostly compressed
	// already.
	`CREATE TABLE shared_files (
		id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		kind    text   NOT NULL CHECK (kind IN ('peer', 'artifact')),
		task_id text   REFERENCES tasks (id) ON DELETE CASCADE,
		name    text   NOT NULL DEFAULT '',
		size    bigint NOT NULL,
		sha256  bytea  NOT NULL,
		created bigint NOT NULL,
		expires bigint,
		CHECK ((kind = 'artifact') = (task_id IS NOT NULL)),
		CHECK ((kind = 'peer') = (expires IS NOT NULL)),
		UNIQUE (task_id, name)
	);
	CREATE UNIQUE INDEX shared_files_peer ON shared_files (sha256) WHERE kind = 'peer';
	CREATE INDEX shared_files_expires ON shared_files (expires) WHERE kind = 'peer';
	CREATE TABLE shared_file_chunks (
		file_id bigint NOT NULL REFERENCES shared_files (id) ON DELETE CASCADE,
		n       int    NOT NULL,
		body    bytea  NOT NULL,
		PRIMARY KEY (file_id, n)
	);
	ALTER TABLE shared_file_chunks ALTER COLUMN body SET STORAGE EXTERNAL;`,
	// Trace context across replicas (DESIGN §17): traceparent, the W3C traceparent of the request that
	// sent a task ('' when it carried none), so that the replica that claims the task runs it in that
	// request's trace, and each push notification of it, kept with its change in the outbox, is posted
	// in that trace whichever replica delivers it. murmur_task_push is schema 6's but for the column.
	`ALTER TABLE tasks ADD COLUMN traceparent text NOT NULL DEFAULT '';
	ALTER TABLE push_outbox ADD COLUMN traceparent text NOT NULL DEFAULT '';
	CREATE OR REPLACE FUNCTION murmur_task_push() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		cur  jsonb;
		body bytea;
		c    record;
	BEGIN
		IF NOT EXISTS (SELECT 1 FROM push_configs WHERE task_id = NEW.id AND NOT ended) THEN
			RETURN NULL;
		END IF;
		cur := convert_from(NEW.task, 'UTF8')::jsonb;
		IF (cur->'status') IS NOT DISTINCT FROM (convert_from(OLD.task, 'UTF8')::jsonb->'status') THEN
			RETURN NULL;
		END IF;
		body := convert_to(jsonb_build_object('task', cur - 'history')::text, 'UTF8');
		FOR c IN SELECT id FROM push_configs WHERE task_id = NEW.id AND NOT ended LOOP
			IF (SELECT count(*) FROM push_outbox WHERE task_id = NEW.id AND config_id = c.id) >= 100 THEN
				DELETE FROM push_outbox WHERE seq = (SELECT max(seq) FROM push_outbox
					WHERE task_id = NEW.id AND config_id = c.id AND claimed_by = '');
			END IF;
			INSERT INTO push_outbox (task_id, config_id, body, traceparent) VALUES (NEW.id, c.id, body, NEW.traceparent);
		END LOOP;
		IF NEW.state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED') THEN
			UPDATE push_configs SET ended = true WHERE task_id = NEW.id;
		END IF;
		PERFORM pg_notify('murmur_push', NEW.id);
		RETURN NULL;
	END $$;`,
	// The bound of a config's outbox, kept with the config: outbox, the bound of the notifier that
	// stored it (pgpush's Config.Push.Outbox, push.DefaultOutbox unless set), in place of schema 6's
	// 100, which the configs of before it keep. murmur_task_push is schema 8's but for the bound.
	`ALTER TABLE push_configs ADD COLUMN outbox int NOT NULL DEFAULT 100;
	CREATE OR REPLACE FUNCTION murmur_task_push() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		cur  jsonb;
		body bytea;
		c    record;
	BEGIN
		IF NOT EXISTS (SELECT 1 FROM push_configs WHERE task_id = NEW.id AND NOT ended) THEN
			RETURN NULL;
		END IF;
		cur := convert_from(NEW.task, 'UTF8')::jsonb;
		IF (cur->'status') IS NOT DISTINCT FROM (convert_from(OLD.task, 'UTF8')::jsonb->'status') THEN
			RETURN NULL;
		END IF;
		body := convert_to(jsonb_build_object('task', cur - 'history')::text, 'UTF8');
		FOR c IN SELECT id, outbox FROM push_configs WHERE task_id = NEW.id AND NOT ended LOOP
			IF (SELECT count(*) FROM push_outbox WHERE task_id = NEW.id AND config_id = c.id) >= c.outbox THEN
				DELETE FROM push_outbox WHERE seq = (SELECT max(seq) FROM push_outbox
					WHERE task_id = NEW.id AND config_id = c.id AND claimed_by = '');
			END IF;
			INSERT INTO push_outbox (task_id, config_id, body, traceparent) VALUES (NEW.id, c.id, body, NEW.traceparent);
		END LOOP;
		IF NEW.state IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED') THEN
			UPDATE push_configs SET ended = true WHERE task_id = NEW.id;
		END IF;
		PERFORM pg_notify('murmur_push', NEW.id);
		RETURN NULL;
	END $$;`,
}

// SchemaVersion is the version of the schema this program writes: the number of its migrations.
func SchemaVersion() int { return len(migrations) }

// migrateLock is the key of the transaction-level advisory lock that migrations take, so that processes
// starting at once against one database migrate it one after the other ("murmur" in ASCII).
const migrateLock = 0x6d75726d7572

// migrate brings the database's schema to this program's version, in one transaction, under the
// advisory lock. A database whose schema is newer is refused with both versions named.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, want int, steps []string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS murmur_schema (version int NOT NULL)`); err != nil {
		return err
	}
	var version int
	err = tx.QueryRow(ctx, `SELECT version FROM murmur_schema`).Scan(&version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, `INSERT INTO murmur_schema (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > want {
		return &newerSchemaError{db: version, program: want}
	}
	if version == want {
		return tx.Commit(ctx)
	}
	for i, step := range steps[version:want] {
		if _, err := tx.Exec(ctx, step); err != nil {
			return fmt.Errorf("migrating the schema to version %d: %w", version+i+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE murmur_schema SET version = $1`, want); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// newerSchemaError is Open's refusal of a database written by a newer program.
type newerSchemaError struct{ db, program int }

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("the database's schema is version %d, newer than this mur's %d: upgrade mur", e.db, e.program)
}
