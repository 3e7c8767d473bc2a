package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
)

// Owners maps each unended task that a replica has claimed to that replica, its owner (DESIGN §16): what
// the door's GET /replicas tells the console of which replica runs a task. An unclaimed task, and an
// ended one, is left out. The unended tasks of a member are bounded by its replicas' places (Offer), so
// the map is small.
func (s *Store) Owners(ctx context.Context) (map[a2a.TaskID]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, owner FROM tasks WHERE owner <> '' AND state IN `+unendedSQL)
	if err != nil {
		return nil, s.fail("reading which replica runs each task", retryRead, err)
	}
	out := map[a2a.TaskID]string{}
	var id, owner string
	if _, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error {
		out[a2a.TaskID(id)] = owner
		return nil
	}); err != nil {
		return nil, s.fail("reading which replica runs each task", retryRead, err)
	}
	return out, nil
}
