package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// walSizeLimit is the journal_size_limit: the size, in bytes, the write-ahead log is cut back to.
const walSizeLimit = 4 << 20

// openDB opens a pool on the file at abs whose every connection gets the store's pragmas.
func openDB(abs, extra string) (*sql.DB, error) {
	q := url.Values{}
	// journal_size_limit: once a checkpoint has emptied the write-ahead log, the next write truncates it
	// to this size, so the log shrinks back after a burst (a flood of rejections, a large sweep).
	// temp_store(MEMORY): an UPDATE of an indexed column inside a transaction keeps a statement journal,
	// which SQLite otherwise writes to a temporary file, page by page: a shutdown's one transaction of
	// 20,000 cancels spent most of its time in those writes. cache_size (KiB when negative): a page cache
	// of 32 MiB at most, so such a transaction does not read back the pages it has just written.
	for _, p := range []string{"busy_timeout(5000)", "temp_store(MEMORY)", "cache_size(-32768)", "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(ON)",
		"journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")"} {
		q.Add("_pragma", p)
	}
	// A file: URI, so that a '?' or '#' in the path is escaped rather than read as the query.
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String() + "?" + q.Encode() + "&" + extra
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("member: task store %s: %w", abs, err)
	}
	return db, nil
}

// createFile makes sure the store's file at abs exists, the owner's alone (mode 0600: SQLite would give
// it the umask's, and gives the -wal and -shm files the mode of the database file), and reports whether
// it wrote a new one, which is then an empty store at the newest schema.
//
// A new file is written whole from newImage's bytes, already in WAL mode, and linked into place: SQLite
// would make an empty file a database through a rollback journal that it creates and deletes (the change
// to WAL mode), then commit the schema, paying seven fsyncs and an inode more; this is one file and the
// fsync of its bytes, before the store is opened, so that no task is ever committed to a write-ahead log
// whose database file is not on disk. The directory's entry for the file is made durable by SQLite
// before the first commit: each connection's first sync of the log fsyncs the log's directory too
// (os_unix.c opens a -wal with SQLITE_OPEN_CREATE, which sets its dirsync), and the first task waits for
// that sync. Where the image cannot be made, or the link not made, SQLite makes the file as before.
func createFile(abs string) (created bool, err error) {
	if _, err := os.Lstat(abs); !errors.Is(err, fs.ErrNotExist) {
		return false, touchFile(abs)
	}
	image, err := newImage()
	if err != nil {
		return false, touchFile(abs)
	}
	dir := filepath.Dir(abs)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(abs)+".new-*") // mode 0600
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // the link below keeps the file; a failure leaves nothing behind
	_, err = tmp.Write(image)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	// A link, not a rename: a file another process made at the same moment is kept, never replaced.
	switch err := os.Link(tmp.Name(), abs); {
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case err != nil: // a file system without hard links
		return false, touchFile(abs)
	}
	return true, nil
}

// touchFile creates the file at abs, empty and mode 0600, when it does not exist, for SQLite to make a
// database of.
func touchFile(abs string) error {
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// newImage returns the bytes of an empty store at the newest schema in WAL mode, made once a process:
// the schema's migrations run in memory (SQLite's memdb), serialized, with the header's file format
// versions set to 2, which is all PRAGMA journal_mode=WAL changes in a file.
var newImage = sync.OnceValues(func() ([]byte, error) {
	db, err := sql.Open("sqlite", "file:/murmur-store-image?vfs=memdb")
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }() // memory only: the image is the serialized copy
	db.SetMaxOpenConns(1)             // the memdb lives while a connection to it does
	if err := migrate(db); err != nil {
		return nil, err
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var image []byte
	err = conn.Raw(func(dc any) error {
		s, ok := dc.(interface{ Serialize() ([]byte, error) })
		if !ok {
			return fmt.Errorf("the sqlite driver's %T cannot serialize a database", dc)
		}
		image, err = s.Serialize()
		return err
	})
	if err != nil {
		return nil, err
	}
	// The header's bytes 18 and 19: the file format's write and read versions, 1 for a rollback
	// journal, 2 for WAL (https://www.sqlite.org/fileformat2.html#file_format_version_numbers).
	if len(image) < 100 || string(image[:len(sqliteMagic)]) != sqliteMagic {
		return nil, errors.New("the serialized database has no SQLite header")
	}
	image[18], image[19] = 2, 2
	return image, nil
})

// sqliteMagic is how every SQLite database file begins (https://www.sqlite.org/fileformat2.html).
const sqliteMagic = "SQLite format 3\x00"

// checkHeader reads the beginning of the database file at abs and checks that it is one: Ping's check
// of a store whose reader has not connected.
func checkHeader(abs string) error {
	f, err := os.Open(abs)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // only read
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("reading %s: %w", abs, err)
	}
	if string(head) != sqliteMagic {
		return fmt.Errorf("%s is not a SQLite database", abs)
	}
	return nil
}
