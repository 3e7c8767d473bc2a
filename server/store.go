package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/store"
	"github.com/murmur-run/murmur/member/store/postgres"
	"github.com/murmur-run/murmur/roster"
)

// memberStore is where a member's tasks are: its roster entry's store:, else MUR_STORE
// (FormationConfig.Store), else "" for the embedded SQLite file.
func memberStore(m roster.Member, cfg FormationConfig) (dsn, password string) {
	if m.Store != "" {
		return m.Store, m.StorePassword
	}
	return cfg.Store, ""
}

// openStore opens member m's task store: the embedded SQLite file dir/tasks.db, or PostgreSQL at the
// address memberStore gives (DESIGN §16), as the replica named replica ("" for one process). sqlite is
// the file's path, which the push notifier keeps its configs in; "" for PostgreSQL, which keeps none yet
// (push is off for such a member). created reports whether the SQLite file is new: no earlier process
// wrote it.
func openStore(ctx context.Context, m roster.Member, replica string, c *capsule.Capsule, cfg FormationConfig, dir string, log *slog.Logger,
	removed func([]a2a.TaskID)) (st store.Tasks, sqlite string, created bool, err error) {
	retention := c.Store.Retention.Or(cfg.Roster.Store.Retention)
	dsn, ref := memberStore(m, cfg)
	if dsn == "" {
		sqlite = filepath.Join(dir, "tasks.db")
		_, err := os.Lstat(sqlite)
		created = errors.Is(err, fs.ErrNotExist)
		s, err := store.OpenWith(sqlite, store.Config{Retention: retention, Now: cfg.Now, Logger: log, Removed: removed})
		if err != nil {
			return nil, "", false, err
		}
		return s, sqlite, created, nil
	}
	full, err := postgres.Address(dsn, ref, cfg.getenv())
	if err != nil {
		return nil, "", false, fmt.Errorf("member %s: %w", m.Name, err)
	}
	s, err := postgres.Open(ctx, full, postgres.Config{Retention: retention, Now: cfg.Now, Logger: log, Removed: removed, Replica: replica})
	if err != nil {
		return nil, "", false, fmt.Errorf("member %s: %w", m.Name, err)
	}
	return s, "", false, nil
}
