package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/murmur-run/murmur/roster"
)

// ErrNewerSchema is Check's error for a database whose schema a newer mur wrote: Open refuses it.
var ErrNewerSchema = errors.New("the database's schema is newer than this mur's")

// Is makes a newer schema's error ErrNewerSchema.
func (e *newerSchemaError) Is(target error) bool { return target == ErrNewerSchema }

// Check connects to the database at dsn as Open would, and reads its schema version without changing
// anything (mur check): the version (0 for a database no mur has used yet, which Open then creates), or
// an error saying why a member could not use it: unreachable, refused, missing, or written by a newer mur
// (wrapping ErrNewerSchema). The error never holds the password.
func Check(ctx context.Context, dsn string) (int, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return 0, errors.New("the task store's address is not a PostgreSQL address: write it as postgres://user@host:5432/database")
	}
	where := describeHost(cfg.Config)
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, openError(where, cfg.User, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	err = conn.QueryRow(ctx, `SELECT version FROM murmur_schema`).Scan(&version)
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg) && pg.Code == "42P01", errors.Is(err, pgx.ErrNoRows): // no murmur_schema: a new database
		return 0, nil
	case err != nil:
		return 0, openError(where, cfg.User, err)
	case version > SchemaVersion():
		return version, fmt.Errorf("the task store at %s: %w", where, &newerSchemaError{db: version, program: SchemaVersion()})
	}
	return version, nil
}

// Address is a member's store URL (roster.yaml's store:, MUR_STORE) with the password ref names
// (store_password: env:NAME or file:PATH) in it; the URL alone when ref is "", so that PostgreSQL's own
// PGPASSWORD and ~/.pgpass apply. Its errors say what is missing, never the password.
func Address(raw, ref string, getenv func(string) string) (string, error) {
	if err := roster.CheckStoreURL(raw); err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	if ref == "" {
		return raw, nil
	}
	var pw string
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := strings.TrimPrefix(ref, "env:")
		if pw = getenv(name); pw == "" {
			return "", fmt.Errorf("store_password: the environment variable %s is not set or is empty: set it to the store's password", name)
		}
	case strings.HasPrefix(ref, "file:"):
		path := strings.TrimPrefix(ref, "file:")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("store_password: %w", err)
		}
		if pw = strings.TrimRight(string(b), "\r\n"); pw == "" {
			return "", fmt.Errorf("store_password: %s is empty: write the store's password in it", path)
		}
	default:
		return "", fmt.Errorf("store_password %q must be env:NAME or file:PATH", ref)
	}
	u, _ := url.Parse(raw) // CheckStoreURL parsed it
	user := ""
	if u.User != nil {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, pw)
	return u.String(), nil
}
