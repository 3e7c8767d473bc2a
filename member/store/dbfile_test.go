package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A new store's file is written whole from the image, its writer connects at its first write and its
// reader at its first read: a store that takes no task (most of a large formation's, at its start) holds
// no connection and has no -wal or -shm file, however often it is pinged or swept, and no rollback
// journal was made on the way.
func TestNewStoreConnectsAtTheFirstWriteAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alpha", "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Recover(t.Context(), storeEpoch); err != nil || len(changed) != 0 {
		t.Fatalf("Recover of a new store: %v, %v", changed, err)
	}
	if n, err := s.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("Sweep of a new store: %d, %v", n, err)
	}
	if w, r := s.write.Stats().OpenConnections, s.read.Stats().OpenConnections; w != 0 || r != 0 {
		t.Errorf("a new store, opened, pinged, recovered and swept, holds %d write and %d read connection(s), want 0 and 0", w, r)
	}
	files := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	// Nothing else is there: no log, no index, no temporary file.
	if diff := cmp.Diff([]string{"tasks.db"}, files()); diff != "" {
		t.Errorf("the store's directory (-want +got):\n%s", diff)
	}
	task := fullTask()
	if err := s.Create(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	if n := s.write.Stats().OpenConnections; n != 1 {
		t.Errorf("after a write the store holds %d write connection(s), want 1", n)
	}
	if diff := cmp.Diff([]string{"tasks.db", "tasks.db-shm", "tasks.db-wal"}, files()); diff != "" {
		t.Errorf("the store's directory after a write (-want +got):\n%s", diff)
	}
	page, err := s.ListInScope(t.Context(), ListQuery{PageSize: 10}, OperatorScope())
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != task.ID {
		t.Fatalf("ListInScope: %+v, %v; want the task created", page, err)
	}
	if n := s.read.Stats().OpenConnections; n != 1 {
		t.Errorf("after a read the store holds %d read connection(s), want 1", n)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping through the reader: %v", err)
	}
}

// Ping of a store whose reader has not connected reads the file: a file that is gone, or is no longer
// a database, makes the store not ready, and so does Close.
func TestPingBeforeTheFirstReadChecksTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(path, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping of a store whose file is not a database: nil error")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping of a store whose file is gone: nil error")
	}
	if s.read.Stats().OpenConnections != 0 {
		t.Error("Ping connected the reader")
	}

	s2, err := Open(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Ping(t.Context()); err == nil {
		t.Error("Ping of a closed store: nil error")
	}
}

// The image a new store is written from is the database the migrations make in a file SQLite turned
// to WAL itself: the same schema, version and journal mode, and a file SQLite finds whole.
func TestNewStoreImageIsTheMigratedSchema(t *testing.T) {
	dir := t.TempDir()
	describe := func(db *sql.DB) map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, pragma := range []string{"user_version", "journal_mode", "page_size", "auto_vacuum", "encoding", "integrity_check"} {
			var v string
			if err := db.QueryRow("PRAGMA " + pragma).Scan(&v); err != nil {
				t.Fatalf("PRAGMA %s: %v", pragma, err)
			}
			got[pragma] = v
		}
		rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ, name, table, text string
			if err := rows.Scan(&typ, &name, &table, &text); err != nil {
				t.Fatal(err)
			}
			got[typ+" "+name] = table + ": " + text
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// Made as before the image: an empty file, WAL mode by the pragma, then the migrations.
	migrated := filepath.Join(dir, "migrated.db")
	if err := touchFile(migrated); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(migrated, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate(db); err != nil {
		t.Fatal(err)
	}
	want := describe(db)

	written := filepath.Join(dir, "written.db")
	created, err := createFile(written)
	if err != nil || !created {
		t.Fatalf("createFile: %v, %v; want a new file", created, err)
	}
	if fi, err := os.Stat(written); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the new file: %v, %v; want mode 0600", fi, err)
	}
	db2, err := openDB(written, "_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if diff := cmp.Diff(want, describe(db2)); diff != "" {
		t.Errorf("the image's database (-migrated +image):\n%s", diff)
	}
	if created, err := createFile(written); err != nil || created {
		t.Errorf("createFile of an existing file: %v, %v; want it kept", created, err)
	}
}
