package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// Watch calls fn, on the calling goroutine, for each committed change of a task by any replica, until
// ctx ends; it returns ctx's error (store.Replicated). It listens on channel murmur_tasks, which the
// tasks table's trigger notifies (schema.go), on a connection of its own, outside the pool: a LISTEN
// lives and dies with its session. When that connection fails (or cannot be made at first) it connects
// again, after 100 ms growing to 2 s between attempts, and once it listens again it calls fn with a
// Resync notice: changes made while it was away were not told. The first failure of a streak is logged
// as a warning, the attempts after it at debug level.
func (s *Store) Watch(ctx context.Context, fn func(store.Notice)) error {
	backoff := watchBackoffMin
	for first := true; ; first = false {
		err := s.listen(ctx, func() {
			backoff = watchBackoffMin
			if !first {
				fn(store.Notice{Resync: true})
			}
		}, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		level := slog.LevelWarn
		if backoff > watchBackoffMin {
			level = slog.LevelDebug
		}
		s.log.Log(ctx, level, "listening to the changes of the member's tasks: the connection to the task store's database was lost; listening again",
			"database", s.where, "err", cause(err), "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// The wait between Watch's attempts to listen again: watchBackoffMin after a lost connection, doubling
// up to watchBackoffMax while the database cannot be reached.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 2 * time.Second
)

// listen connects, runs LISTEN, calls listening, then reports each notification to fn until the
// connection fails or ctx ends, and closes the connection.
func (s *Store) listen(ctx context.Context, listening func(), fn func(store.Notice)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN murmur_tasks; LISTEN murmur_inputs`); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		parse := parseNotice
		if n.Channel == "murmur_inputs" {
			parse = parseInputNotice
		}
		if notice, ok := parse(n.Payload); ok {
			fn(notice)
		} else {
			s.log.Warn("a notification of a task's change cannot be read: it is skipped", "payload", n.Payload)
		}
	}
}

// parseNotice reads the trigger's payload, "id version owner state cancel" (owner may be empty; an id,
// which a client may choose, may hold spaces, so the fields are taken from the right).
func parseNotice(payload string) (store.Notice, bool) {
	f := strings.Split(payload, " ")
	n := len(f)
	if n < 5 || (f[n-1] != "0" && f[n-1] != "1") {
		return store.Notice{}, false
	}
	return store.Notice{
		ID:     a2a.TaskID(strings.Join(f[:n-4], " ")),
		Owner:  f[n-3],
		State:  a2a.TaskState(f[n-2]),
		Cancel: f[n-1] == "1",
	}, true
}

// parseInputNotice reads the inputs trigger's payload, "n answered task-id".
func parseInputNotice(payload string) (store.Notice, bool) {
	f := strings.SplitN(payload, " ", 3)
	if len(f) != 3 || (f[1] != "0" && f[1] != "1") || f[2] == "" {
		return store.Notice{}, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n <= 0 {
		return store.Notice{}, false
	}
	return store.Notice{ID: a2a.TaskID(f[2]), Input: n, Answered: f[1] == "1"}, true
}
